#!/usr/bin/env bun
// `bun scripts/lag.ts DIR THRESHOLD`: the same command as packages/ops/dist/lag.sh, from source.
import { main } from "../packages/ops/src/lag.ts"

process.exitCode = await main(process.argv.slice(2))
