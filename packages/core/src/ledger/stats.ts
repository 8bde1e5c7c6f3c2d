// The statistics of `stats`, the same on both ledgers: what they are, and how the rows of
// sql/stats.sql become them. Each adapter runs the queries in one snapshot of its own.
import statsSql from "../../sql/stats.sql" with { type: "text" }

/** What the consumer did over one period. */
export interface StatsPeriod {
  /** Messages recorded for the first time (rows of processed). */
  readonly processed: number
  /** Later deliveries of a msg_id already processed, conflicts included. */
  readonly duplicates: number
  /** duplicates / (processed + duplicates): the share of valid deliveries that were repeats; null with none. */
  readonly duplicateRate: number | null
  /** Duplicates whose bytes differ from the first delivery's. */
  readonly conflicts: number
  /** Files sent to error/. */
  readonly failures: number
  readonly failuresByReason: Readonly<Record<string, number>>
  /** Failures with reason poison: files that were in hand at every death of their consumer, the last time alone. */
  readonly poison: number
  /** Files moved from error/ back to inbox/ by replay. */
  readonly replays: number
}

/** The ledger's statistics over all time and over a recent window. */
export interface LedgerStats {
  /** Start of the recent window (ISO 8601 UTC). */
  readonly since: string
  readonly allTime: StatsPeriod
  readonly recent: StatsPeriod
  /** Distinct msg_ids ever seen as duplicates (the lines of dup.txt). */
  readonly duplicateIds: number
  /** Failures neither replayed nor deleted since, by reason; the stats command counts the files in error/ instead. */
  readonly openFailures: Readonly<Record<string, number>>
  readonly lastProcessedAt: string | null
}

/** The row of stats.sql's `deliveries` query. */
export interface DeliveriesRow {
  processed: number
  processed_recent: number
  duplicates: number
  duplicates_recent: number
  duplicate_ids: number
  conflicts: number
  conflicts_recent: number
  replays: number
  replays_recent: number
  last_processed_at: string | null
}

/** A row of stats.sql's `failures` query. */
export interface FailureRow {
  reason: string
  total: number
  recent: number
  open: number
}

/** The named queries of a .sql file whose statements each follow a `-- name: NAME` line. */
function namedQueries(text: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const chunk of text.split(/^-- name: */m).slice(1)) {
    const newline = chunk.indexOf("\n")
    const name = chunk.slice(0, newline).trim()
    out[name] = chunk.slice(newline + 1).trim()
  }
  return out
}

const queries = namedQueries(statsSql)

/** A query of sql/stats.sql, which both adapters run: `deliveries` or `failures`, its `:since` unbound. */
export function statsQuery(name: "deliveries" | "failures"): string {
  const sql = queries[name]
  if (sql === undefined) throw new Error(`stats.sql has no query named ${name}`)
  return sql
}

/** The statistics from the rows of both queries, whichever ledger ran them. */
export function statsFrom(since: string, d: DeliveriesRow, f: readonly FailureRow[]): LedgerStats {
  return {
    since,
    allTime: period(d.processed, d.duplicates, d.conflicts, d.replays, f, "total"),
    recent: period(d.processed_recent, d.duplicates_recent, d.conflicts_recent, d.replays_recent, f, "recent"),
    duplicateIds: d.duplicate_ids,
    openFailures: byReason(f, "open"),
    lastProcessedAt: d.last_processed_at,
  }
}

/** The statistics of a queue that has no ledger yet. */
export function emptyStats(since: Date): LedgerStats {
  const zero = period(0, 0, 0, 0, [], "total")
  return {
    since: since.toISOString(),
    allTime: zero,
    recent: zero,
    duplicateIds: 0,
    openFailures: {},
    lastProcessedAt: null,
  }
}

function period(
  processed: number,
  duplicates: number,
  conflicts: number,
  replays: number,
  failures: readonly FailureRow[],
  column: "total" | "recent",
): StatsPeriod {
  const failuresByReason = byReason(failures, column)
  return {
    processed,
    duplicates,
    duplicateRate: processed + duplicates === 0 ? null : duplicates / (processed + duplicates),
    conflicts,
    failures: Object.values(failuresByReason).reduce((a, b) => a + b, 0),
    failuresByReason,
    poison: failuresByReason.poison ?? 0,
    replays,
  }
}

function byReason(rows: readonly FailureRow[], column: "total" | "recent" | "open"): Record<string, number> {
  return Object.fromEntries(rows.filter((r) => r[column] > 0).map((r) => [r.reason, r[column]]))
}
