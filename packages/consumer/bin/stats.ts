#!/usr/bin/env bun
import { main } from "../src/stats.ts"

process.exitCode = await main(process.argv.slice(2))
