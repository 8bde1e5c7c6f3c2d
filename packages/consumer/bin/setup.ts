#!/usr/bin/env bun
import { main } from "../src/setup.ts"

process.exitCode = await main(process.argv.slice(2))
