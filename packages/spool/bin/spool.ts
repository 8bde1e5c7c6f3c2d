#!/usr/bin/env bun
import { main } from "../src/spool.ts"

process.exitCode = await main(process.argv.slice(2))
