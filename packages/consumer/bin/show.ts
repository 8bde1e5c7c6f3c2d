#!/usr/bin/env bun
import { main } from "../src/show.ts"

process.exitCode = await main(process.argv.slice(2))
