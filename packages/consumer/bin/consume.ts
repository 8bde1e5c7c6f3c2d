#!/usr/bin/env bun
import { main } from "../src/consume.ts"

process.exitCode = await main(process.argv.slice(2))
