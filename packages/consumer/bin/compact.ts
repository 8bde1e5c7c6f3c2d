#!/usr/bin/env bun
// Signals first, the command after: a SIGTERM while the command loads asks it to stop, and it
// stops as documented instead of dying with status 143.
import { catchStopSignals, stopCatchingSignals } from "@spool/cli/stop"

catchStopSignals()
const { main } = await import("../src/compact.ts")
process.exitCode = await main(process.argv.slice(2))
// Answered: a signal from now on ends the process, whatever a library left open.
stopCatchingSignals()
