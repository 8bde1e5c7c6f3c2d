#!/usr/bin/env bun
// `bun scripts/replay.ts FILE`: the same command as packages/ops/dist/replay.sh, from source.
import { main } from "../packages/ops/src/replay.ts"

process.exitCode = await main(process.argv.slice(2))
