// The statements both ledgers run as they are, written once. They name no root (a PostgreSQL
// ledger's retention and its owners' rows are the ledger's, not one root's) and use only SQL
// both dialects read alike; parameters are written `$1`, `$2`, as PostgreSQL numbers them, and
// `forSqlite` spells them `?1`, `?2` for SQLite.
import type { CompactSummary } from "./model.ts"

export const statements = {
  /** SQLite's heartbeat, by this host's clock; PostgreSQL stamps its own by the server's (postgres/lease.ts). */
  heartbeat: "UPDATE consumers SET heartbeat_at = $1 WHERE owner_id = $2",
  /** A consumer's committed claims, whose files have left processing/, as it ends. */
  deleteCommittedClaims: "DELETE FROM claims WHERE owner_id = $1 AND state = 'committed'",
  deleteConsumer: "DELETE FROM consumers WHERE owner_id = $1",
  renameFailure: "UPDATE failures SET file = $1 WHERE claim_id = $2",
  forgetDuplicates: "DELETE FROM duplicates WHERE seen_at < $1",
  /** Failures whose file left error/ (replayed or deleted) before the cutoff. */
  forgetReplayedFailures: "DELETE FROM failures WHERE replayed_at < $1 OR deleted_at < $1",
  forgetReplays: "DELETE FROM replays WHERE replayed_at < $1",
  /** The record of each file an operator deleted (its failure is closed, and forgotten with forgetReplayedFailures). */
  forgetDeletions: "DELETE FROM deletions WHERE deleted_at < $1",
  /**
   * A landed delivery's origin is needed while its message may still come back: redelivered (its
   * claim in hand or deferred) or replayed (its failure still in error/, neither replayed nor deleted). Past the
   * retention, a done or replayed one is forgotten with the rest of its history. The claims in
   * hand are read once as a list (claim_id is NOT NULL there): no index leads to a claim by its
   * id, and SQLite would otherwise scan the claims once for every origin.
   */
  forgetOrigins: `DELETE FROM origins WHERE landed_at < $1
    AND NOT EXISTS (SELECT 1 FROM failures f WHERE f.claim_id = origins.claim_id AND f.replayed_at IS NULL AND f.deleted_at IS NULL)
    AND origins.claim_id NOT IN (SELECT claim_id FROM claims)
    AND NOT EXISTS (SELECT 1 FROM deferrals r WHERE r.claim_id = origins.claim_id)`,
  /** Each order's highest pruned seq, kept so that a redelivery of a pruned key is not taken as new. */
  raiseHorizon: `INSERT INTO horizon (order_no, max_seq, pruned, pruned_at)
    SELECT order_no, MAX(seq), COUNT(*), $1 FROM processed WHERE processed_at < $2 GROUP BY order_no
    ON CONFLICT (order_no) DO UPDATE SET
      max_seq = CASE WHEN excluded.max_seq > horizon.max_seq THEN excluded.max_seq ELSE horizon.max_seq END,
      pruned = horizon.pruned + excluded.pruned, pruned_at = excluded.pruned_at`,
  pruneKeys: "DELETE FROM processed WHERE processed_at < $1",
  /** The result an effect returned, kept with its processed row (JSON text). */
  storeResult: "UPDATE processed SET result = $1 WHERE msg_id = $2",
  resultOf: "SELECT result FROM processed WHERE msg_id = $1",
} as const

/** A shared statement with SQLite's spelling of its parameters. */
export function forSqlite(statement: string): string {
  return statement.replace(/\$(\d+)/g, "?$1")
}

/** A statement to run and its parameters; what it yields back is how many rows the statement changed. */
type Step = readonly [statement: string, params: readonly (string | number)[]]

/** A sequence of shared statements, each step's row count sent back into it, returning `T`. */
type Steps<T> = Generator<Step, T, number>

/** Runs `steps` on a synchronous connection (SQLite): `run` returns the rows a statement changed. */
export function runSteps<T>(steps: Steps<T>, run: (statement: string, params: Step[1]) => number): T {
  for (let r = steps.next(0); ; ) {
    if (r.done) return r.value
    r = steps.next(run(...r.value))
  }
}

/** Runs `steps` on an asynchronous connection (PostgreSQL). */
export async function runStepsAsync<T>(
  steps: Steps<T>,
  run: (statement: string, params: Step[1]) => Promise<number>,
): Promise<T> {
  for (let r = steps.next(0); ; ) {
    if (r.done) return r.value
    r = steps.next(await run(...r.value))
  }
}

/**
 * Retention, in the caller's transaction: history (duplicates, closed failures, replays,
 * deletions, origins) older than `historyCutoff` and, when `keyCutoff` is given, processed
 * rows (idempotency keys) older than it, each order's highest pruned seq raised in `horizon`
 * first. Returns what was removed.
 */
export function* prune(historyCutoff: string, keyCutoff: string | undefined, now: string): Steps<CompactSummary> {
  const duplicates = yield [statements.forgetDuplicates, [historyCutoff]]
  const failures = yield [statements.forgetReplayedFailures, [historyCutoff]]
  const replays = yield [statements.forgetReplays, [historyCutoff]]
  const deletions = yield [statements.forgetDeletions, [historyCutoff]]
  const origins = yield [statements.forgetOrigins, [historyCutoff]]
  let keys = 0
  if (keyCutoff !== undefined) {
    yield [statements.raiseHorizon, [now, keyCutoff]]
    keys = yield [statements.pruneKeys, [keyCutoff]]
  }
  return { duplicates, failures, replays, deletions, origins, keys }
}
