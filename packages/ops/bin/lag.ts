#!/usr/bin/env bun
import { main } from "../src/lag.ts"

process.exitCode = await main(process.argv.slice(2))
