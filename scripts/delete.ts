#!/usr/bin/env bun
// `bun scripts/delete.ts FILE`: throw failed or deferred messages away (the same as `spool delete`).
import { main } from "../packages/ops/src/delete.ts"

process.exitCode = await main(process.argv.slice(2))
