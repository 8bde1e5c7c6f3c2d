#!/usr/bin/env bun
// Signals first, the command after (see consume's entry point); a command with no safe point
// to stop at gets their default action back.
import { catchStopSignals, releaseStopSignals } from "@spool/cli/stop"

catchStopSignals()
const { main, stopsCleanly } = await import("../src/spool.ts")
if (!stopsCleanly(process.argv[2])) releaseStopSignals()
process.exitCode = await main(process.argv.slice(2))
