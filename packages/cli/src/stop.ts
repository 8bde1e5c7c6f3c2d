// The stop signals, caught from the first statement of a command's process. Until a process
// handles SIGTERM, its default action ends the process at once with status 143, a code no
// command documents; an entry point that imported its command before handling it would leave
// that window open for as long as the imports take (tens of milliseconds, more on a loaded
// machine). This module imports nothing, so an entry point catches them before anything loads.

/**
 * The signals that stop a command cleanly, at its next safe point. SIGHUP too: a closed
 * terminal or SSH connection must not cut a batch in half.
 */
export const stopSignals = ["SIGINT", "SIGTERM", "SIGHUP"] as const

/** A command's hold on the process's stop request. */
export interface StopRequest {
  /** Aborts at the first stop signal, even one caught before the command began; its reason is the signal's name. */
  readonly signal: AbortSignal
  /** Ends a catch the command started itself; one an entry point started stays for the process's life. */
  release(): void
}

let stop = new AbortController()
let isCaughtForLife = false
let holders = 0

function onSignal(signal: NodeJS.Signals): void {
  if (!stop.signal.aborted) stop.abort(signal)
}

function isCaught(): boolean {
  return isCaughtForLife || holders > 0
}

/** Catches the stop signals for the rest of the process: an entry point's first statement. */
export function catchStopSignals(): void {
  if (!isCaught()) for (const s of stopSignals) process.on(s, onSignal)
  isCaughtForLife = true
}

/**
 * Gives the stop signals their default action back (the process ends at once), for a command
 * that has no safe point to stop at; one caught meanwhile ends the process now, as it would have.
 */
export function releaseStopSignals(): void {
  if (!isCaughtForLife) return
  isCaughtForLife = false
  if (holders > 0) return
  for (const s of stopSignals) process.off(s, onSignal)
  if (stop.signal.aborted) process.kill(process.pid, stop.signal.reason as NodeJS.Signals)
}

/**
 * For an entry point whose command has returned: the stop signals end the process at once
 * again. The command has answered any stop request already (its exit code says so), so none
 * is raised again; what a library left running past it (a socket it never closed) then cannot
 * hold the process against a signal.
 */
export function stopCatchingSignals(): void {
  isCaughtForLife = false
  if (holders === 0) for (const s of stopSignals) process.off(s, onSignal)
}

/**
 * The stop request for a command's run: caught from the entry point's first statement, or from
 * now when main() is called in-process, until `release`.
 */
export function holdStopRequest(): StopRequest {
  if (!isCaught()) {
    // A fresh request for each in-process run: a signal one run took is not the next run's.
    stop = new AbortController()
    for (const s of stopSignals) process.on(s, onSignal)
  }
  holders++
  let isReleased = false
  return {
    signal: stop.signal,
    release() {
      if (isReleased) return
      isReleased = true
      holders--
      if (!isCaught()) for (const s of stopSignals) process.off(s, onSignal)
    },
  }
}
