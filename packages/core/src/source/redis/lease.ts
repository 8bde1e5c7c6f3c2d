// The lease on entries in hand, as commands on a client of the caller's: self-contained (a client,
// the group's coordinates, a list of ids), so that it can run on a connection of its own wherever
// the timer that calls it runs.
import type Redis from "ioredis"

/** Which consumer of which group of which stream holds the entries. */
export interface Holder {
  readonly stream: string
  readonly group: string
  readonly consumer: string
}

/**
 * Restarts the idle time of entries `holder` has in hand (XCLAIM to itself with min-idle 0,
 * JUSTID: the delivery count is left as it is), so that no other consumer's XAUTOCLAIM takes them
 * while they are worked on. An id no longer pending (acknowledged meanwhile) is skipped by
 * Redis. One that another consumer took over while this one was stalled past its lease is
 * taken back: both then hold the message, and the ledger keeps its effect to one.
 */
export async function refreshLease(client: Redis, holder: Holder, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return
  await client.call("XCLAIM", holder.stream, holder.group, holder.consumer, "0", ...ids, "JUSTID")
}

/**
 * Hands entries back while leaving them pending: their idle time is set so that they are
 * `leaseMs - delayMs` idle, which makes them due for XAUTOCLAIM (by any consumer, this one
 * included) after `delayMs`, at once without it. Redis has no delayed redelivery of its own.
 */
export async function handBack(
  client: Redis,
  holder: Holder,
  ids: readonly string[],
  leaseMs: number,
  delayMs = 0,
): Promise<void> {
  if (ids.length === 0) return
  const idle = String(Math.max(0, Math.round(leaseMs - Math.max(0, delayMs))))
  await client.call("XCLAIM", holder.stream, holder.group, holder.consumer, "0", ...ids, "IDLE", idle, "JUSTID")
}
