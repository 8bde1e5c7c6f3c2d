#!/usr/bin/env bun
import { main } from "../src/schema.ts"

process.exitCode = await main(process.argv.slice(2))
