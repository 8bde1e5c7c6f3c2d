// Test-only fault injection. SPOOL_FAULT names a protocol step at which the process kills
// itself with SIGKILL (no cleanup runs, exactly as a crash): `after-claim`, `after-commit`,
// `after-move`, `after-reports`, optionally `step@N` for the N-th time the step is reached.
// SPOOL_CRASH_ON=name kills the process whenever it processes that file (a poison message).
const [faultStep, faultAt] = (process.env.SPOOL_FAULT ?? "").split("@")
const crashOn = process.env.SPOOL_CRASH_ON
let reached = 0

/** The protocol steps a test can crash at. */
export type FaultStep = "after-claim" | "after-commit" | "after-move" | "after-reports"

export function fault(step: FaultStep): void {
  if (step !== faultStep) return
  reached++
  if (reached >= Number(faultAt ?? 1)) process.kill(process.pid, "SIGKILL")
}

export function crashIfPoison(name: string): void {
  if (crashOn !== undefined && name === crashOn) process.kill(process.pid, "SIGKILL")
}
