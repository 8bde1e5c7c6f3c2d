// What the operator commands ask of the SQLite ledger: failures by file, one message's
// history, replay's ledger half, the report lock, and retention. SqliteLedger's methods call
// these with its prepared statements.
import type { Database, Statement } from "bun:sqlite"
import orderCheckSql from "../../../sql/order-check.sql" with { type: "text" }
import orderRangesSql from "../../../sql/order-ranges.sql" with { type: "text" }
import { type HistoryKeys, keyLists, type LedgerHistory, toHistory } from "../history.ts"
import {
  type CompactSummary,
  type FailureRecord,
  type OrderCheck,
  type OrderProblem,
  type OrderProblemRange,
  orderResultRows,
  type ReplayRecord,
} from "../model.ts"
import { forSqlite, prune, runSteps } from "../statements.ts"
import { asLedgerError } from "./errors.ts"
import type { SqliteLedger } from "./ledger.ts"
import type { Statements } from "./schema.ts"

/** The reason of the latest unreplayed failure of every file recorded in error/. */
export function failureReasons(s: Statements): Map<string, string> {
  const reasons = new Map<string, string>()
  // By id: the latest failure recorded under a name is the one set last.
  for (const r of s.failureReasons.iterate() as IterableIterator<{ file: string; reason: string }>)
    reasons.set(r.file, r.reason)
  return reasons
}

/** The latest unreplayed failure recorded under each of `files` in error/ (those that have one). */
export function unreplayedFailures(s: Statements, files: readonly string[]): Map<string, FailureRecord> {
  const found = new Map<string, FailureRecord>()
  // By id: the latest failure recorded under a name is the one set last.
  for (const r of s.unreplayedFailures.iterate(JSON.stringify(files)) as IterableIterator<
    FailureRecord & { file: string }
  >)
    found.set(r.file, { reason: r.reason, payloadHash: r.payloadHash, failedAt: r.failedAt })
  return found
}

/** Every row matching `keys` (see LedgerHistory), read in one transaction. */
export function history(db: Database, s: Statements, keys: HistoryKeys): LedgerHistory {
  const { msgIds, files, hashes } = keyLists(keys)
  const all = (q: Statement, ...params: string[]) => q.all(...params) as never[]
  return db.transaction(() =>
    toHistory({
      processed: all(s.historyProcessed, msgIds, files, hashes),
      duplicates: all(s.historyDuplicates, msgIds, files, hashes),
      failures: all(s.historyFailures, files, hashes),
      replays: all(s.historyReplays, files, hashes),
      claims: all(s.historyClaims, files),
    }),
  )()
}

/** Marks the latest failure record of `file` replayed and logs the replay, inside the caller's transaction. */
export function markReplayed(s: Statements, file: string, now: string): boolean {
  const row = s.latestFailure.get(file) as { id: number } | null
  s.insertReplay.run(file, row?.id ?? null, now)
  if (row === null) return false
  s.markReplayed.run(now, row.id)
  return true
}

/**
 * A replay's ledger half around its move (see LedgerPort). The write lock, taken up front,
 * serializes it with every other replay, so two bulk replays cannot both pass the limit.
 */
export function recordReplay(
  l: SqliteLedger,
  s: Statements,
  file: string,
  now: string,
  move: () => void,
  maxReplays: number,
): ReplayRecord {
  return l.transaction((): ReplayRecord => {
    const count = l.replayCount(file)
    if (count >= maxReplays) return { kind: "too-often", count }
    const isRecordMarked = markReplayed(s, file, now)
    move()
    return { kind: "replayed", isRecordMarked }
  })
}

/**
 * Runs `fn` under the write lock (BEGIN IMMEDIATE), held across its awaits: no commit lands
 * between its reads and its renames. Other writes of this process meanwhile join the
 * transaction (as savepoints), so `fn` must not wait on them.
 */
export async function withReportLock<T>(l: SqliteLedger, fn: () => Promise<T>): Promise<T> {
  try {
    l.db.exec("BEGIN IMMEDIATE")
  } catch (error) {
    throw asLedgerError(error, l.path)
  }
  try {
    const result = await fn()
    l.db.exec("COMMIT")
    return result
  } catch (error) {
    if (l.db.inTransaction) l.db.exec("ROLLBACK")
    throw asLedgerError(error, l.path)
  }
}

/**
 * Retention: forgets history (duplicates, closed failures, replays, deletions, origins) older
 * than `historyCutoff` and, when `keyCutoff` is given, processed rows (idempotency keys) older
 * than it, keeping each order's highest pruned seq in `horizon`. One transaction; returns what was removed.
 * With `dryRun` the same statements run and are rolled back: the counts are exactly what a
 * real run removes.
 */
export function compact(
  l: SqliteLedger,
  historyCutoff: string,
  keyCutoff: string | undefined,
  now: string,
  options: { dryRun?: boolean } = {},
): CompactSummary {
  if (options.dryRun) {
    let summary: CompactSummary | undefined
    try {
      l.transaction(() => {
        summary = compact(l, historyCutoff, keyCutoff, now)
        throw rollback
      })
    } catch (error) {
      if (error !== rollback) throw error
    }
    return summary as CompactSummary
  }
  // A shared statement with SQLite's parameters; each step returns the rows it changed.
  return l.transaction(() =>
    runSteps(
      prune(historyCutoff, keyCutoff, now),
      (statement, params) => l.db.run(forSqlite(statement), params as (string | number)[]).changes,
    ),
  )
}

const rollback = new Error("roll back the dry run")

/** The order check's ranges, then order-check.sql as checked in when they come to at most `maxRows` rows, in one read transaction. */
export function orderCheck(db: Database, maxRows: number): OrderCheck {
  return db
    .transaction((): OrderCheck => {
      const ranges = db.query(orderRangesSql).all() as OrderProblemRange[]
      if (orderResultRows(ranges) > maxRows) return { ranges }
      return { ranges, problems: db.query(orderCheckSql).all() as OrderProblem[] }
    })
    .deferred()
}
