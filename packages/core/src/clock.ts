import { clockOffsetMs } from "./_fault.ts"

/**
 * Milliseconds since the epoch by this host's clock: the time spool writes into the ledger and
 * judges ages by (a test can set it off the kernel's, as on a host whose clock is wrong).
 */
export function wallClock(): number {
  return Date.now() + clockOffsetMs
}
