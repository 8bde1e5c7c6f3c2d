// What the contract's cases are given: a ledger of one backend opened fresh, what that backend
// supports, and builders for the outcomes a consumer commits. Registers no test of its own.
import { it } from "bun:test"
import type { Owner } from "../../queue/owner.ts"
import type { DeferPolicy } from "../../transient.ts"
import type { AcceptedOutcome, Claim, Outcome, Verdict } from "../model.ts"
import type { LedgerPort } from "../port.ts"

/** What one backend has that the other lacks; a case for one of them is registered only where it holds. */
export interface Features {
  /** Roots on many hosts share the ledger: a msg_id processed under one root is a duplicate under every other. */
  readonly sharedAcrossHosts: boolean
  /** Heartbeats are dated by the ledger's own clock (a server every host reads alike), not by the `now` given. */
  readonly serverClock: boolean
  /** An effect may await: the commit holds its transaction open across it while other sessions work. */
  readonly asyncEffect: boolean
}

/** What an effect does for one first delivery, after recording its msg_id in `applied`: return a result, or throw. */
export type Act = (outcome: AcceptedOutcome) => unknown

/** A ledger opened through the public opener on a fresh root (and, for PostgreSQL, a fresh database). */
export interface LedgerUnderTest extends AsyncDisposable {
  readonly ledger: LedgerPort
  /**
   * Commits with an effect that inserts the msg_id into the table `applied` inside the commit,
   * then runs `act`: its writes commit or roll back with the outcome's.
   */
  commit(
    ownerId: string,
    outcomes: readonly Outcome[],
    now: string,
    act?: Act,
    policy?: DeferPolicy,
  ): Promise<Verdict[]>
  /** The rows of a query in SQL both backends read alike (the `applied` table, columns the port does not show). */
  rows(query: string): Promise<Record<string, unknown>[]>
  /** The same root's ledger opened again: another consumer's session. */
  openAgain(): Promise<LedgerUnderTest>
  /** The ledger of another queue root on the same store: the same database on PostgreSQL, the root's own file on SQLite. */
  openOtherRoot(): Promise<LedgerUnderTest>
}

/** One backend the contract runs on. */
export interface LedgerBackend {
  readonly name: string
  readonly features: Features
  /** Why its cases are skipped here; undefined: they run. */
  readonly skip: string | undefined
  open(): Promise<LedgerUnderTest>
  /** Removes what it keeps for its cases once they have all run. */
  finish(): Promise<void>
}

/** `it` where the backend has `feature`; elsewhere the case is not registered at all. */
export function itWith(
  b: LedgerBackend,
  feature: keyof Features,
): typeof it | ((...args: Parameters<typeof it>) => void) {
  return b.features[feature] ? it : () => {}
}

export const NOW = "2026-11-29T10:00:00.000Z"
export const LATER = "2026-11-29T11:00:00.000Z"
/** A cutoff past every time the cases write: compact forgets everything before it. */
export const FAR = "2999-01-01T00:00:00.000Z"

export function owner(ownerId: string): Owner {
  return { ownerId, host: "test-host", pid: 1, bootId: "boot", startTicks: "1" }
}

/** An accepted outcome of a claim; its content hash is `c-<msgId>` unless given. */
export function accepted(c: Claim, msgId: string, fields: Partial<AcceptedOutcome> = {}): AcceptedOutcome {
  return {
    kind: "accepted",
    name: c.name,
    claimId: c.claimId,
    msgId,
    orderNo: "A-1",
    seq: 1,
    amount: "1.10",
    hash: `bytes-${c.name}`,
    contentHash: `c-${msgId}`,
    message: { msg_id: msgId },
    ...fields,
  }
}

export function rejected(
  c: Claim,
  reason = "parse",
  fields: Partial<Extract<Outcome, { kind: "rejected" }>> = {},
): Outcome {
  return {
    kind: "rejected",
    name: c.name,
    claimId: c.claimId,
    destName: c.name,
    reason,
    detail: "",
    hash: null,
    ...fields,
  }
}

export function vanished(c: Claim): Outcome {
  return { kind: "vanished", name: c.name, claimId: c.claimId }
}

/** The claims of `names`, in order; fails the case when one was not given. */
export async function claimAll(l: LedgerPort, ownerId: string, names: readonly string[], now = NOW): Promise<Claim[]> {
  const claims = await l.claim(ownerId, names, now)
  if (claims.length !== names.length)
    throw new Error(`claimed ${claims.map((c) => c.name).join(", ")} of ${names.join(", ")}`)
  return claims
}

/** Sends each [name, reason, hash?] to error/ as consume does: claimed, committed, then forgotten. */
export async function fail(l: LedgerPort, failures: readonly [string, string, string?][], now = NOW): Promise<void> {
  const claims = await claimAll(
    l,
    "o",
    failures.map(([n]) => n),
    now,
  )
  const outcomes = claims.map((c, i) => {
    const [, reason, hash] = failures[i] as [string, string, string?]
    return rejected(c, reason, { hash: hash ?? null })
  })
  await l.commit("o", outcomes, now)
  await l.claim("o", [], now, claims)
}

/** Everything an iterable of either kind yields. */
export async function all<T>(items: Iterable<T> | AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of items) out.push(x)
  return out
}
