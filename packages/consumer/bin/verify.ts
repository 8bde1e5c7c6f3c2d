#!/usr/bin/env bun
import { main } from "../src/verify.ts"

process.exitCode = await main(process.argv.slice(2))
