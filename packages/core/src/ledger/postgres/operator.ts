// What the operator commands ask of the PostgreSQL ledger: the reports' duplicates and
// conflicts, failures by file, one message's
// history, a replay's ledger half, retention and the order check. PostgresLedger's methods call
// these; every query is scoped to the ledger's root where its table has one.
import type { SQL } from "bun"
import orderCheckSql from "../../../sql/order-check.sql" with { type: "text" }
import orderRangesSql from "../../../sql/order-ranges.sql" with { type: "text" }
import { type HistoryKeys, type LedgerHistory, toHistory } from "../history.ts"
import {
  type CompactSummary,
  type ConflictRow,
  type FailureRecord,
  type OrderCheck,
  type OrderProblem,
  type OrderProblemRange,
  orderResultRows,
  type ReplayRecord,
} from "../model.ts"
import { prune, runStepsAsync } from "../statements.ts"
import { HORIZON_LOCK } from "./commit.ts"
import type { PostgresLedger } from "./ledger.ts"

/** The distinct msg_ids ever seen as duplicates (by any root), ascending by code point, in pages. */
export async function* duplicateIds(l: PostgresLedger): AsyncGenerator<string> {
  // In pages after the last id seen; null before the first page.
  for (let after: string | null = null; ; ) {
    const rows = (await l.sql`
      SELECT DISTINCT msg_id COLLATE "C" AS msg_id FROM duplicates
      WHERE ${after}::text IS NULL OR msg_id COLLATE "C" > ${after}
      ORDER BY 1 LIMIT 10000`) as { msg_id: string }[]
    for (const r of rows) yield r.msg_id
    if (rows.length < 10000) return
    after = (rows.at(-1) as { msg_id: string }).msg_id
  }
}

/** Every conflicting redelivery with the delivery that was processed, by msg_id. */
export async function* conflicts(l: PostgresLedger): AsyncGenerator<ConflictRow> {
  const rows = await l.sql`
    SELECT d.msg_id, d.file, d.content_hash, p.file AS processed_file, p.content_hash AS processed_content_hash
    FROM duplicates d JOIN processed p ON p.msg_id = d.msg_id
    WHERE d.is_conflict = 1 ORDER BY d.msg_id COLLATE "C", d.id`
  yield* rows as ConflictRow[]
}

/** The reason of the latest unreplayed failure of every file this root has recorded in error/. */
export async function failureReasons(l: PostgresLedger): Promise<Map<string, string>> {
  const rows = (await l.sql`
    SELECT DISTINCT ON (file) file, reason FROM failures
    WHERE root_id = ${l.rootId} AND replayed_at IS NULL AND deleted_at IS NULL ORDER BY file, id DESC`) as {
    file: string
    reason: string
  }[]
  return new Map(rows.map((r) => [r.file, r.reason]))
}

/** The latest unreplayed failure recorded under each of `files` in this root's error/ (those that have one). */
export async function unreplayedFailures(
  l: PostgresLedger,
  files: readonly string[],
): Promise<Map<string, FailureRecord>> {
  const rows = (await l.sql`
    SELECT DISTINCT ON (file) file, reason, payload_hash AS "payloadHash", failed_at AS "failedAt" FROM failures
    WHERE root_id = ${l.rootId} AND replayed_at IS NULL AND deleted_at IS NULL
      AND file IN (SELECT jsonb_array_elements_text(${files}::jsonb))
    ORDER BY file, id DESC`) as (FailureRecord & { file: string })[]
  return new Map(rows.map((r) => [r.file, { reason: r.reason, payloadHash: r.payloadHash, failedAt: r.failedAt }]))
}

/** Every row of this root matching `keys` (see LedgerHistory), in one repeatable-read snapshot. */
export function history(l: PostgresLedger, keys: HistoryKeys): Promise<LedgerHistory> {
  const root = l.rootId
  return l.sql.begin("ISOLATION LEVEL REPEATABLE READ READ ONLY", async (tx) => {
    const ids = tx`(SELECT jsonb_array_elements_text(${keys.msgIds ?? []}::jsonb))`
    const names = tx`(SELECT jsonb_array_elements_text(${keys.files ?? []}::jsonb))`
    const sums = tx`(SELECT jsonb_array_elements_text(${keys.payloadHashes ?? []}::jsonb))`
    const failed = tx`(file IN ${names} OR original IN ${names} OR payload_hash IN ${sums})`
    const processed = await tx`
      SELECT msg_id, file, processed_at, claim_id, payload_hash, content_hash, result FROM processed
      WHERE root_id = ${root} AND (msg_id IN ${ids} OR file IN ${names} OR payload_hash IN ${sums})
      ORDER BY processed_at, msg_id`
    const duplicates = await tx`
      SELECT msg_id, file, seen_at, is_conflict, claim_id, payload_hash, content_hash FROM duplicates
      WHERE root_id = ${root} AND (msg_id IN ${ids} OR file IN ${names} OR payload_hash IN ${sums})
      ORDER BY id`
    const failures = await tx`
      SELECT id, file, original, reason, detail, payload_hash, claim_id, failed_at, replayed_at, deleted_at FROM failures
      WHERE root_id = ${root} AND ${failed} ORDER BY id`
    const replays = await tx`
      SELECT file, failure_id, replayed_at FROM replays
      WHERE root_id = ${root}
        AND (file IN ${names} OR failure_id IN (SELECT id FROM failures WHERE root_id = ${root} AND ${failed}))
      ORDER BY id`
    const claims = await tx`
      SELECT c.name, c.claim_id, c.owner_id, c.attempts, c.state, c.dest, c.dest_name, c.payload_hash, c.claimed_at,
             o.host, o.pid, o.boot_id, o.start_ticks, o.heartbeat_at
      FROM claims c LEFT JOIN consumers o ON o.owner_id = c.owner_id
      WHERE c.root_id = ${root} AND c.name IN ${names} ORDER BY c.seq_no`
    return toHistory({ processed, duplicates, failures, replays, claims } as never)
  })
}

/**
 * A replay's ledger half around its move (see LedgerPort), under a transaction-scoped
 * advisory lock on this root's file name, so two hosts replaying the same file at once cannot
 * both pass the limit (there may be no failure row to lock).
 */
export function recordReplay(
  l: PostgresLedger,
  file: string,
  now: string,
  move: () => void,
  maxReplays = Number.POSITIVE_INFINITY,
): Promise<ReplayRecord> {
  return l.transaction(async (tx): Promise<ReplayRecord> => {
    await tx`SELECT pg_advisory_xact_lock(hashtext(${replayLockKey(l.rootId, file)}))`
    const count = await replaysOf(tx, l.rootId, file)
    if (count >= maxReplays) return { kind: "too-often", count }
    const isRecordMarked = await markFailure(tx, l.rootId, file, now)
    move()
    return { kind: "replayed", isRecordMarked }
  })
}

/** Runs `fn` in a transaction holding this root's report lock (see LedgerPort.withReportLock). */
export function withReportLock<T>(l: PostgresLedger, fn: () => Promise<T>): Promise<T> {
  return l.transaction(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtext(${`spool-reports:${l.rootId}`}))`
    return fn()
  })
}

/** The ranges, then order-check.sql when they come to at most `maxRows` rows, in one snapshot. */
export function orderCheck(l: PostgresLedger, maxRows: number): Promise<OrderCheck> {
  return l.transaction(async (tx) => {
    await tx`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY`
    const rows = (await tx.unsafe(orderRangesSql)) as {
      order_no: string
      first: string
      last: string
      problem: string
    }[]
    const ranges = rows.map((r) => ({
      order_no: r.order_no,
      first: Number(r.first),
      last: Number(r.last),
      problem: r.problem as OrderProblemRange["problem"],
    }))
    if (orderResultRows(ranges) > maxRows) return { ranges }
    // order-check.sql exactly as checked in (the same file the sqlite3 shell runs).
    const problems = (await tx.unsafe(orderCheckSql)) as { order_no: string; seq: string | number; problem: string }[]
    return {
      ranges,
      problems: problems.map((r) => ({
        order_no: r.order_no,
        seq: Number(r.seq),
        problem: r.problem as OrderProblem["problem"],
      })),
    }
  })
}

/**
 * Retention, as the SQLite ledger's compact, over the whole ledger: every root's history and
 * keys (deduplication and the horizon are the ledger's, not one root's, and a root whose host
 * is gone is pruned too). With `dryRun` the same statements run and are rolled back, so the
 * counts are exactly what a real run removes.
 */
export async function compact(
  l: PostgresLedger,
  historyCutoff: string,
  keyCutoff: string | undefined,
  now: string,
  options: { dryRun?: boolean } = {},
): Promise<CompactSummary> {
  if (!options.dryRun) return l.transaction((tx) => pruneIn(tx, historyCutoff, keyCutoff, now))
  return l.transaction(async (tx) => {
    let summary: CompactSummary | undefined
    try {
      await tx.savepoint(async (sp) => {
        summary = await pruneIn(sp, historyCutoff, keyCutoff, now)
        throw rollback
      })
    } catch (error) {
      if (error !== rollback) throw error
    }
    return summary as CompactSummary
  })
}

const rollback = new Error("roll back the dry run")

/** The advisory lock a replay or a deletion of `file` in this root takes, so the two never interleave. */
export function replayLockKey(rootId: string, file: string): string {
  return `spool-replay:${rootId}:${file}`
}

export async function replaysOf(sql: SQL, rootId: string, file: string): Promise<number> {
  const [row] = await sql`SELECT COUNT(*)::int AS n FROM replays WHERE root_id = ${rootId} AND file = ${file}`
  return row.n as number
}

/** Marks the latest unreplayed failure of `file` replayed and logs the replay, in the caller's transaction. */
export async function markFailure(tx: SQL, rootId: string, file: string, now: string): Promise<boolean> {
  const [row] = await tx`
    SELECT id FROM failures WHERE root_id = ${rootId} AND file = ${file} AND replayed_at IS NULL AND deleted_at IS NULL
    ORDER BY id DESC LIMIT 1 FOR UPDATE`
  await tx`INSERT INTO replays (root_id, file, failure_id, replayed_at) VALUES (${rootId}, ${file}, ${row?.id ?? null}, ${now})`
  if (!row) return false
  await tx`UPDATE failures SET replayed_at = ${now} WHERE id = ${row.id}`
  return true
}

/** compact's statements (../statements.ts), in the caller's transaction or savepoint. */
async function pruneIn(
  tx: SQL,
  historyCutoff: string,
  keyCutoff: string | undefined,
  now: string,
): Promise<CompactSummary> {
  // Keys are pruned only between commits (see HORIZON_LOCK); history alone needs no lock.
  if (keyCutoff !== undefined) await tx`SELECT pg_advisory_xact_lock(${HORIZON_LOCK})`
  return runStepsAsync(
    prune(historyCutoff, keyCutoff, now),
    async (statement, params) => (await tx.unsafe(statement, [...params])).count,
  )
}
