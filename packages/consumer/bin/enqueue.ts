#!/usr/bin/env bun
import { main } from "../src/enqueue.ts"

process.exitCode = await main(process.argv.slice(2))
