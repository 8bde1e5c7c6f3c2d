// The SQLite ledger's batch commit: the questions of the verdict rules (../verdicts.ts)
// asked statement by statement inside the IMMEDIATE transaction SqliteLedger.commit opens, and the
// rows the Judgement decides written.
import type { Database } from "bun:sqlite"
import { fault } from "../../_fault.ts"
import { alternateName } from "../../queue/names.ts"
import { type DeferPolicy, isTransient } from "../../transient.ts"
import { type AcceptedOutcome, claimRecord, type Outcome, type RawDeferral, type Verdict } from "../model.ts"
import { Judgement, resultText } from "../verdicts.ts"
import type { Effect } from "./ledger.ts"
import type { Statements } from "./schema.ts"

/**
 * Commits a batch of outcomes: each claim marked first (the fence), then processed rows in batch
 * order (the PRIMARY KEY decides duplicates, and the first delivery of a msg_id wins as in a
 * sequential run), then the duplicate and failure history.
 */
export function commitBatch(
  db: Database,
  s: Statements,
  ownerId: string,
  outcomes: readonly Outcome[],
  now: string,
  effect: Effect | undefined,
  policy?: DeferPolicy,
): Verdict[] {
  const j = new Judgement(outcomes, now, policy)
  for (const o of outcomes) j.fence(o, isHeld(s, o, ownerId))
  // No compact can prune between the horizon's answers and the inserts: both are writers, and
  // this IMMEDIATE transaction holds the one write lock to its end.
  if (s.hasHorizon.get() !== null)
    for (const o of j.undecided()) {
      const h = s.horizonOf.get(o.orderNo) as { max_seq: number } | null
      if (h !== null) j.horizon(o, h.max_seq, s.processedHash.get(o.msgId) !== null)
    }
  fault("in-commit")
  // Row by row, a failed effect's rollback frees its key before the next delivery's insert, so
  // one round decides them all.
  for (let round = j.nextRound(); round.length > 0; round = j.nextRound())
    for (const o of round) insert(db, s, j, o, now, effect)
  for (const d of j.duplicates) {
    const o = d.outcome
    s.insertDuplicate.run(o.msgId, o.name, o.hash, o.contentHash, d.isConflict ? 1 : 0, o.claimId, now)
  }
  for (const f of j.failures) s.insertFailure.run(f.file, f.original, f.reason, f.detail, f.hash, f.claimId, now)
  for (const o of j.redirected()) s.commitClaim.run("error", o.name, o.hash, o.name, o.claimId, ownerId)
  // Step 5, asked only of a ledger that holds deferrals (or is writing its first): one
  // indexed probe per batch on the path that never defers.
  if (j.deferrals.length > 0 || s.hasDeferrals.get() !== null) {
    for (const id of j.closed()) s.closeDeferral.run(id)
    for (const d of j.deferrals) {
      const o = d.outcome
      // A picked-up file goes back under its own name; a first deferral takes the first name
      // no other deferred file has (another delivery of the same name may be waiting there).
      let file = o.name
      for (let k = 1; !d.isPickedUp && s.deferralAt.get(file) !== null; k++) file = alternateName(o.name, k)
      s.upsertDeferral.run(
        file,
        o.msgId,
        d.attempts,
        d.firstDeferredAt,
        d.nextAttemptAt,
        d.lastError,
        o.hash,
        o.claimId,
      )
      s.commitClaim.run("deferred", file, o.hash, o.name, o.claimId, ownerId)
    }
  }
  return j.verdicts()
}

/** The fence: marks the outcome's claim committed (ends it, for a vanished file) if `ownerId` still holds it. */
function isHeld(s: Statements, o: Outcome, ownerId: string): boolean {
  if (o.kind === "vanished") return s.releaseClaim.run(o.name, o.claimId, ownerId).changes === 1
  if (o.kind === "rejected")
    return s.commitClaim.run("error", o.destName, claimRecord(o), o.name, o.claimId, ownerId).changes === 1
  return s.commitClaimDone.run(o.name, o.claimId, ownerId).changes === 1
}

/** Inserts one processed row under the PRIMARY KEY and, when it takes, runs the effect in a savepoint. */
function insert(
  db: Database,
  s: Statements,
  j: Judgement,
  o: AcceptedOutcome,
  now: string,
  effect: Effect | undefined,
): void {
  const row = [o.msgId, o.orderNo, o.seq, o.amount, o.name, o.hash, o.contentHash, o.claimId, now] as const
  if (effect === undefined) {
    if (s.insertProcessed.run(...row).changes === 1) j.inserted(o)
    else j.refused(o, processedHash(s, o.msgId))
    return
  }
  db.exec("SAVEPOINT spool_effect")
  if (s.insertProcessed.run(...row).changes === 0) {
    db.exec("RELEASE spool_effect")
    j.refused(o, processedHash(s, o.msgId))
    return
  }
  try {
    const result = resultText(effect(o, db), true)
    if (result !== undefined) s.storeResult.run(result, o.msgId)
    db.exec("RELEASE spool_effect")
    j.inserted(o)
  } catch (error) {
    db.exec("ROLLBACK TO spool_effect")
    db.exec("RELEASE spool_effect")
    const prior = isTransient(error) ? (s.deferralOf.get(o.claimId) as RawDeferral | null) : null
    j.effectFailed(
      o,
      error,
      prior === null ? undefined : { attempts: prior.attempts, firstDeferredAt: prior.first_deferred_at },
    )
  }
}

function processedHash(s: Statements, msgId: string): string | undefined {
  return (s.processedHash.get(msgId) as { content_hash: string } | null)?.content_hash
}
