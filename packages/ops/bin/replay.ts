#!/usr/bin/env bun
import { main } from "../src/replay.ts"

process.exitCode = await main(process.argv.slice(2))
