// Test-only fault injection. SPOOL_FAULT names a protocol step at which the process kills
// itself with SIGKILL (no cleanup runs, exactly as a crash): `after-claim` (files renamed
// into processing/, nothing committed), `after-commit` (committed, not yet moved),
// `after-move` (moved, claim rows not yet forgotten), `after-reports` (reports written),
// `after-pickup-claim` (due deferred files claimed, still in deferred/), `after-pickup` (those
// renamed into processing/, nothing committed),
// optionally `step@N` for the N-th time the step is reached. SPOOL_FAULT_SIGNAL=SIGSTOP stops
// the process there instead (a stall: a paused VM, a hung mount), for a test to resume with
// SIGCONT. SPOOL_CRASH_ON=name kills the process whenever it reads that file (a poison
// message); several names are separated by `/`, the one character no file name holds. All
// are read once, at start-up.
const steps = [
  "after-claim",
  "after-commit",
  "after-move",
  "after-reports",
  "after-pickup-claim",
  "after-pickup",
] as const

/** The protocol steps a test can crash at. */
export type FaultStep = (typeof steps)[number]

const [faultStep, faultAt = "1"] = (process.env.SPOOL_FAULT ?? "").split("@")
// A misspelt hook would never fire and a crash test would silently test nothing: refuse it.
if (faultStep && (!steps.includes(faultStep as FaultStep) || !/^[1-9]\d*$/.test(faultAt)))
  throw new Error(`SPOOL_FAULT=${process.env.SPOOL_FAULT}: expected one of ${steps.join(", ")}, optionally @N (N >= 1)`)
const faultSignal = process.env.SPOOL_FAULT_SIGNAL ?? "SIGKILL"
if (faultSignal !== "SIGKILL" && faultSignal !== "SIGSTOP")
  throw new Error(`SPOOL_FAULT_SIGNAL=${faultSignal}: expected SIGKILL (the default) or SIGSTOP`)
const crashOn = new Set((process.env.SPOOL_CRASH_ON ?? "").split("/").filter((n) => n !== ""))
let reached = 0

/** Kills (or stops) the process if SPOOL_FAULT names this step and it is reached for the N-th time. */
export function fault(step: FaultStep): void {
  if (step !== faultStep) return
  reached++
  if (reached === Number(faultAt)) process.kill(process.pid, faultSignal)
}

/** Kills the process with SIGKILL if SPOOL_CRASH_ON names this file. */
export function crashIfPoison(name: string): void {
  if (crashOn.size > 0 && crashOn.has(name)) process.kill(process.pid, "SIGKILL")
}
