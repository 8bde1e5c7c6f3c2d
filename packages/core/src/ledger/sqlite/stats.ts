import type { Database } from "bun:sqlite"
import { type DeliveriesRow, type FailureRow, type LedgerStats, statsFrom, statsQuery } from "../stats.ts"

/** The statistics of `stats` from a SQLite ledger; the recent window starts at `since`. */
export function readStats(db: Database, since: Date): LedgerStats {
  const params = { since: since.toISOString() }
  // One read transaction: both queries see the same snapshot even while a consumer commits.
  return db
    .transaction(() =>
      statsFrom(
        params.since,
        db.query(statsQuery("deliveries")).get(params) as DeliveriesRow,
        db.query(statsQuery("failures")).all(params) as FailureRow[],
      ),
    )
    .deferred()
}
