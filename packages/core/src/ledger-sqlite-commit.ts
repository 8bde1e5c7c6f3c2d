// The SQLite ledger's batch commit, statement by statement inside the IMMEDIATE transaction
// Ledger.commit opens: the claim marked first (the fence), then the PRIMARY KEY decides.
import type { Database } from "bun:sqlite"
import type { Effect } from "./ledger.ts"
import type { prepare } from "./ledger-sqlite-schema.ts"
import { beyondHorizon, type Outcome, type Verdict } from "./ledger-types.ts"
import { toStorableText } from "./storable-text.ts"

type Statements = ReturnType<typeof prepare>

/**
 * Commits a batch of outcomes: processed rows (the PRIMARY KEY decides duplicates), duplicate
 * and failure history, and each claim marked committed, in batch order, so the first delivery
 * of a msg_id wins as in a sequential run.
 */
export function commitBatch(
  db: Database,
  s: Statements,
  ownerId: string,
  outcomes: readonly Outcome[],
  now: string,
  effect: Effect | undefined,
): Verdict[] {
  const hasHorizon = s.hasHorizon.get() !== null
  const verdicts = outcomes.map((o): Verdict => {
    // The claim is marked first, and only if it is still this owner's: that is the fence.
    if (o.kind === "vanished") return s.releaseClaim.run(o.name, o.claimId, ownerId).changes === 1 ? "vanished" : "lost"
    if (o.kind === "rejected") {
      if (s.commitClaim.run("error", o.destName, o.hash, o.name, o.claimId, ownerId).changes === 0) return "lost"
      recordFailure(s, o.destName, o.name, o.reason, o.detail, o.hash, o.claimId, now)
      return "rejected"
    }
    if (s.commitClaimDone.run(o.name, o.claimId, ownerId).changes === 0) return "lost"
    if (hasHorizon && s.processedHash.get(o.msgId) === null) {
      const h = s.horizonOf.get(o.orderNo) as { max_seq: number } | null
      if (h !== null && o.seq <= h.max_seq) {
        recordFailure(
          s,
          o.name,
          o.name,
          "beyond-horizon",
          beyondHorizon(o.seq, h.max_seq, o.orderNo),
          o.hash,
          o.claimId,
          now,
        )
        s.commitClaim.run("error", o.name, o.hash, o.name, o.claimId, ownerId)
        return "beyond-horizon"
      }
    }
    if (effect !== undefined) db.exec("SAVEPOINT spool_effect")
    if (
      s.insertProcessed.run(o.msgId, o.orderNo, o.seq, o.amount, o.name, o.hash, o.contentHash, o.claimId, now)
        .changes === 1
    ) {
      if (effect !== undefined) {
        try {
          effect(o, db)
          db.exec("RELEASE spool_effect")
        } catch (error) {
          db.exec("ROLLBACK TO spool_effect")
          db.exec("RELEASE spool_effect")
          const detail = error instanceof Error ? error.message : String(error)
          recordFailure(s, o.name, o.name, "handler", detail, o.hash, o.claimId, now)
          s.commitClaim.run("error", o.name, o.hash, o.name, o.claimId, ownerId)
          return "handler-rejected"
        }
      }
      return "processed"
    }
    if (effect !== undefined) db.exec("RELEASE spool_effect")
    const first = s.processedHash.get(o.msgId) as { content_hash: string } | null
    const isConflict = first !== null && first.content_hash !== o.contentHash
    s.insertDuplicate.run(o.msgId, o.name, o.hash, o.contentHash, isConflict ? 1 : 0, o.claimId, now)
    return isConflict ? "conflict" : "duplicate"
  })
  return verdicts
}

/** A failures row. Its detail is free text (a parser's message, a handler's error): made storable. */
function recordFailure(
  s: Statements,
  file: string,
  original: string,
  reason: string,
  detail: string,
  hash: string | null,
  claimId: string,
  now: string,
): void {
  s.insertFailure.run(file, original, reason, toStorableText(detail), hash, claimId, now)
}
