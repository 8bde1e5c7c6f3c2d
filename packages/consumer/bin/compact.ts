#!/usr/bin/env bun
import { main } from "../src/compact.ts"

process.exitCode = await main(process.argv.slice(2))
