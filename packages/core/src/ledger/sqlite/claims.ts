// The SQLite ledger's claim transactions: the one that `claim`, `claimLanded` and `claimDue` share,
// and the queries about landed deliveries. SqliteLedger's methods call these with its prepared
// statements, its claim ids and its transactions.
import { type FailureOriginRow, originParams, toFailureOrigin } from "../landings.ts"
import { type Claim, type Deferral, type FailureOrigin, type Landing, landingKey } from "../model.ts"
import type { Statements } from "./schema.ts"

/** What the claim transactions need of the ledger they run in. */
export interface ClaimTransactions {
  readonly s: Statements
  /** A claim id no other claim of this ledger has had. */
  nextClaimId(ownerId: string): string
  lazily<T>(fn: () => T): T
  transaction<T>(fn: () => T): T
}

/**
 * The claim transaction: forgets `forget` (committed claims whose files have durably left
 * processing/), refreshes the heartbeat, and inserts a claim row per free name; `take` (run in
 * the same transaction) may still give a new claim up, by returning false. `isLazy` commits it
 * process-crash durable only (see below); otherwise at the ledger's own level.
 */
export function claimEach(
  l: ClaimTransactions,
  ownerId: string,
  names: readonly string[],
  now: string,
  forget: readonly Claim[],
  take?: (name: string, claimId: string) => boolean,
  isLazy = true,
): Claim[] {
  const { s } = l
  const claimed: Claim[] = []
  const claimAll = () =>
    l.transaction(() => {
      // A prepared statement per row: measured faster than one statement over a JSON array,
      // whose element extraction costs more than the per-call overhead it saves.
      for (const c of forget) s.forgetClaim.run(c.name, c.claimId, ownerId)
      s.heartbeat.run(now, ownerId)
      for (const name of names) {
        const claimId = l.nextClaimId(ownerId)
        if (s.insertClaim.run(name, claimId, ownerId, now).changes !== 1) continue
        if (take === undefined || take(name, claimId)) claimed.push({ name, claimId, attempts: 1 })
        else s.releaseClaim.run(name, claimId, ownerId)
      }
    })
  // Lazily, a claim of files already in the queue is process-crash durable only (no WAL fsync):
  // the claim rows need to be on disk only before the commit that follows, and that commit's
  // fsync (synchronous=FULL) makes every earlier WAL frame durable with it. A power cut before
  // that commit can lose these rows; the files then sit in processing/ with no claim, and
  // recovery claims and processes them as orphans, which is right because nothing about them
  // was committed. One fsync per batch saved. A landed claim is not lazy: see claimLanded.
  if (isLazy) l.lazily(claimAll)
  else claimAll()
  return claimed
}

/**
 * Claims landed deliveries: each free name's claim row with its attempts, and its origins row,
 * committed at the ledger's own level (synchronous=FULL when durable: the WAL is fsynced) before
 * any body is landed. A landed file must never outlive its claim and origins rows: after a power
 * cut, recovery would take such a file for an orphan, a new message, and the broker's redelivery
 * of it would then be counted a duplicate instead of recognised as the same delivery.
 */
export function claimLanded(
  l: ClaimTransactions,
  ownerId: string,
  landings: readonly Landing[],
  now: string,
  forget: readonly Claim[],
): Claim[] {
  const byName = new Map(landings.map((d) => [d.name, d]))
  const claims = claimEach(
    l,
    ownerId,
    [...byName.keys()],
    now,
    forget,
    (name, claimId) => {
      const d = byName.get(name) as Landing
      l.s.setAttempts.run(d.attempts, name, claimId)
      l.s.insertOrigin.run(...originParams(claimId, d, now))
      return true
    },
    false,
  )
  return claims.map((c) => ({ ...c, attempts: (byName.get(c.name) as Landing).attempts }))
}

/**
 * Claims due deferred files, like `claimEach`: a claim row per free name, and the file's
 * deferrals row (and its origin, for a landed delivery) made the new claim's, only while it is
 * still the one listed and still due (another consumer may have taken it and deferred it again
 * meanwhile: that claim is given up at once).
 */
export function claimDue(
  l: ClaimTransactions,
  ownerId: string,
  due: readonly Deferral[],
  now: string,
  forget: readonly Claim[],
): Claim[] {
  const listed = new Map(due.map((d) => [d.file, d.claimId]))
  const names = due.map((d) => d.file)
  return claimEach(l, ownerId, names, now, forget, (name, claimId) => {
    const from = listed.get(name) ?? ""
    if (l.s.pickUpDeferral.run(claimId, name, from, now).changes !== 1) return false
    l.s.copyOrigin.run(claimId, from)
    return true
  })
}

/** The origin of the latest unreplayed failure under the name `file` in error/, if a broker delivered it. */
export function failureOrigin(s: Statements, file: string): FailureOrigin | undefined {
  const row = s.failureOrigin.get(file) as FailureOriginRow | null
  return row === null ? undefined : toFailureOrigin(row)
}

/** Which of these landed (name, payload hash) pairs already have an outcome, by `landingKey`. */
export function committedLandings(
  s: Statements,
  pairs: readonly { readonly name: string; readonly payloadHash: string }[],
): Set<string> {
  const found = new Set<string>()
  for (const p of pairs)
    if (s.committedLanding.get(p.name, p.payloadHash) !== null) found.add(landingKey(p.name, p.payloadHash))
  return found
}

/** Which of these claims landed a broker delivery: the claim ids with an origins row. */
export function landedClaims(s: Statements, claimIds: readonly string[]): Set<string> {
  return new Set(claimIds.filter((id) => s.landedClaim.get(id) !== null))
}
