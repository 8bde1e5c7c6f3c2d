import { clockOffsetMs } from "./_fault.ts"

/**
 * Milliseconds since the epoch by this host's clock: the time spool writes into the ledger and
 * judges ages by (a test can set it off the kernel's, as on a host whose clock is wrong).
 */
export function wallClock(): number {
  return Date.now() + clockOffsetMs
}

/**
 * `work`, or a rejection with `late()` once `ms` have passed without its answer. The work goes
 * on unawaited; a failure it meets afterwards is nobody's to hear.
 */
export function withTimeout<T>(
  work: Promise<T>,
  ms: number,
  late: () => Error = () => new Error(`no answer within ${ms / 1000} s`),
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), ms)
  })
  work.catch(() => {})
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer))
}
