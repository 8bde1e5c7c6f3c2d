#!/usr/bin/env bun
import { main } from "../src/order-check.ts"

process.exitCode = await main(process.argv.slice(2))
