// Test-only fault injection. SPOOL_FAULT names a protocol step at which the process kills
// itself with SIGKILL (no cleanup runs, exactly as a crash): `after-claim` (files renamed
// into processing/, nothing committed), `after-commit` (committed, not yet moved),
// `after-move` (moved, claim rows not yet forgotten), `after-reports` (reports written),
// `after-pickup-claim` (due deferred files claimed, still in deferred/), `after-pickup` (those
// renamed into processing/, nothing committed), `in-commit` (inside the commit transaction:
// claims marked, the horizon asked, no processed row inserted yet), `before-recovery` (a run's
// consumer registered, recovery about to list the claims), `before-attempt` (a file recovery
// retries alone, or a delivery taken alone, read, its attempt not yet counted), `after-publish` (a source's publish confirmed
// by the broker: a replay whose file is still in error/), `after-land-write` (a batch of broker
// deliveries claimed and written under tmp/, not yet renamed into processing/), `before-land-claim`
// (a batch of deliveries received and checked for earlier outcomes, not yet claimed), `after-binding-check`
// (a writer found the root's binding, or none, and has created nothing yet),
// optionally `step@N` for the N-th time the step is reached. SPOOL_FAULT_SIGNAL=SIGSTOP stops
// the process there instead (a stall: a paused VM, a hung mount), for a test to resume with
// SIGCONT. SPOOL_CRASH_ON=name kills the process whenever it reads that file (a poison
// message); several names are separated by `/`, the one character no file name holds.
// SPOOL_CLOCK_OFFSET=+5m (or -5m, 100d, ...) sets spool's reading of this host's clock that far
// from the kernel's: a host whose clock is wrong. SPOOL_BOOT_ID=ID stands in for the kernel's
// boot id (/proc/sys/kernel/random/boot_id): a test that cuts the power of a test file system
// starts the consumers after each cut with a new one, as a real reboot would, so every owner from
// before the cut counts as dead. All are read once, at start-up.
const steps = [
  "after-claim",
  "after-commit",
  "after-move",
  "after-reports",
  "after-pickup-claim",
  "after-pickup",
  "in-commit",
  "before-recovery",
  "before-attempt",
  "after-publish",
  "after-land-write",
  "after-binding-check",
  "before-land-claim",
] as const

/** The protocol steps a test can crash at. */
type FaultStep = (typeof steps)[number]

const [faultStep, faultAt = "1"] = (process.env.SPOOL_FAULT ?? "").split("@")
// A misspelt hook would never fire and a crash test would silently test nothing: refuse it.
if (faultStep && (!steps.includes(faultStep as FaultStep) || !/^[1-9]\d*$/.test(faultAt)))
  throw new Error(`SPOOL_FAULT=${process.env.SPOOL_FAULT}: expected one of ${steps.join(", ")}, optionally @N (N >= 1)`)
const faultSignal = process.env.SPOOL_FAULT_SIGNAL ?? "SIGKILL"
if (faultSignal !== "SIGKILL" && faultSignal !== "SIGSTOP")
  throw new Error(`SPOOL_FAULT_SIGNAL=${faultSignal}: expected SIGKILL (the default) or SIGSTOP`)
const crashOn = new Set((process.env.SPOOL_CRASH_ON ?? "").split("/").filter((n) => n !== ""))
const offset = /^([+-]?)(\d+)(ms|s|m|h|d)$/.exec(process.env.SPOOL_CLOCK_OFFSET ?? "0ms")
if (offset === null)
  throw new Error(
    `SPOOL_CLOCK_OFFSET=${process.env.SPOOL_CLOCK_OFFSET}: expected a signed duration, such as +5m or -100d`,
  )
const bootId = process.env.SPOOL_BOOT_ID
// A space would split it from the pid namespace that owner.ts appends to it.
if (bootId !== undefined && !/^[\w-]+$/.test(bootId))
  throw new Error(`SPOOL_BOOT_ID=${bootId}: expected letters, digits, - and _ (a boot id such as a UUID)`)
/** The boot id this process takes for the kernel's, if a test set one (SPOOL_BOOT_ID). */
export const bootIdOverride: string | undefined = bootId
const machineId = process.env.SPOOL_MACHINE_ID
if (machineId !== undefined && !/^[\w-]+$/.test(machineId))
  throw new Error(
    `SPOOL_MACHINE_ID=${machineId}: expected letters, digits, - and _ (a machine id such as /etc/machine-id's)`,
  )
/** The machine id this process takes for /etc/machine-id's, if a test set one (SPOOL_MACHINE_ID). */
export const machineIdOverride: string | undefined = machineId
const units = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const
/** How far this process's reading of the wall clock is from the kernel's, in milliseconds. */
export const clockOffsetMs = (offset[1] === "-" ? -1 : 1) * Number(offset[2]) * units[offset[3] as keyof typeof units]
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
