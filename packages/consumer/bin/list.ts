#!/usr/bin/env bun
import { main } from "../src/list.ts"

process.exitCode = await main(process.argv.slice(2))
