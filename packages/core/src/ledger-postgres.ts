import { SQL, type TransactionSQL } from "bun"
import orderCheckSql from "../sql/order-check.sql" with { type: "text" }
import { SpoolError } from "./errors.ts"
import { type HistoryKeys, type LedgerHistory, toHistory } from "./ledger-history.ts"
import type { LedgerPort } from "./ledger-port.ts"
import { commitBatch } from "./ledger-postgres-commit.ts"
import { asLedgerError, pgCode, redact } from "./ledger-postgres-errors.ts"
import { ledgerIdOf, migrate, versionOf } from "./ledger-postgres-schema.ts"
import { prune, runStepsAsync, statements } from "./ledger-statements.ts"
import {
  type AcceptedOutcome,
  type AdoptedRow,
  adopted,
  type Claim,
  type ClaimRow,
  type CompactSummary,
  type ConflictRow,
  type Deferral,
  type FailureRecord,
  type OrderProblem,
  type Outcome,
  type RawClaimRow,
  type RawDeferral,
  type RawOwner,
  type ReplayRecord,
  toClaimRow,
  toDeferral,
  toOwner,
  type Verdict,
} from "./ledger-types.ts"
import { parseResult } from "./ledger-verdicts.ts"
import { type LedgerCheck, verifyPostgres } from "./ledger-verify.ts"
import type { Owner } from "./owner.ts"
import { type LedgerStats, readSharedStats } from "./stats.ts"
import type { DeferPolicy } from "./transient.ts"

export { redact } from "./ledger-postgres-errors.ts"

/**
 * A business effect on the PostgreSQL ledger: runs inside the commit transaction, in a savepoint
 * of its own. What it returns or resolves to (JSON-serialisable) is stored with the processed row.
 */
export type PostgresEffect = (outcome: AcceptedOutcome, tx: SQL) => unknown

// Deadlocks and serialization failures are retried: the transaction rolled back whole.
const RETRYABLE = new Set(["40P01", "40001"])

type Tx = TransactionSQL

/**
 * The PostgreSQL ledger: the same tables and guarantees as the SQLite one, shared by consumers
 * on many hosts. Every row that belongs to a queue root carries its `rootId`. Transactions are
 * short and lock rows in a fixed order (msg_id, name), so concurrent consumers do not deadlock;
 * when PostgreSQL still reports one, the whole transaction is retried.
 */
export class PostgresLedger implements LedgerPort<PostgresEffect> {
  readonly backend = "postgres" as const
  /** A connection cut after COMMIT was sent leaves the outcome to the server. */
  readonly isFailedCommitInDoubt = true
  readonly sql: SQL
  readonly url: string
  readonly rootId: string
  #claimCounter = 0

  private constructor(sql: SQL, url: string, rootId: string) {
    this.sql = sql
    this.url = url
    this.rootId = rootId
  }

  /** Connects, and creates or upgrades the schema (one migrator at a time, under an advisory lock). */
  static async open(url: string, rootId: string, options: { migrate?: boolean } = {}): Promise<PostgresLedger> {
    const sql = new SQL({ url, max: 2, idleTimeout: 30, connectionTimeout: 10 })
    const ledger = new PostgresLedger(sql, url, rootId)
    try {
      if (options.migrate !== false) await migrate(sql)
      else if ((await ledger.version()) === 0)
        throw new SpoolError("ledger", `${redact(url)} has no spool ledger yet; run consume first`)
    } catch (error) {
      await sql.close().catch(() => {})
      throw asLedgerError(error, url)
    }
    return ledger
  }

  /** Whether spool has set up a ledger in the database at `url` (read without creating or changing anything). */
  static async isSetUp(url: string): Promise<boolean> {
    const sql = new SQL({ url, max: 1, connectionTimeout: 10 })
    try {
      return (await versionOf(sql)) > 0
    } catch (error) {
      throw asLedgerError(error, url)
    } finally {
      await sql.close().catch(() => {})
    }
  }

  /**
   * The identity of the spool ledger at `url`, without creating or changing anything: its id,
   * undefined for a database spool has never migrated to version 3 (a new database, or one
   * written by an older spool).
   */
  static async identify(url: string): Promise<string | undefined> {
    const sql = new SQL({ url, max: 1, connectionTimeout: 10 })
    try {
      return await ledgerIdOf(sql)
    } catch (error) {
      throw asLedgerError(error, url)
    } finally {
      await sql.close().catch(() => {})
    }
  }

  /** This ledger's identity (see identify). */
  ledgerId(): Promise<string | undefined> {
    return ledgerIdOf(this.sql)
  }

  /** The schema version in the database (0 when spool has never run there). */
  version(): Promise<number> {
    return versionOf(this.sql)
  }

  /** Runs `fn` in a transaction, retrying it whole on deadlock or serialization failure. */
  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return (await this.sql.begin((tx) => fn(tx))) as T
      } catch (error) {
        const code = pgCode(error)
        if (code !== undefined && RETRYABLE.has(code) && attempt < 8) {
          await Bun.sleep(Math.random() * 20 * attempt)
          continue
        }
        throw asLedgerError(error, this.url)
      }
    }
  }

  async registerConsumer(owner: Owner, now: string): Promise<void> {
    await this.sql`
      INSERT INTO consumers (owner_id, root_id, host, pid, boot_id, start_ticks, started_at, heartbeat_at)
      VALUES (${owner.ownerId}, ${this.rootId}, ${owner.host}, ${owner.pid}, ${owner.bootId}, ${owner.startTicks}, ${now}, ${now})
      ON CONFLICT (owner_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`
  }

  async unregisterConsumer(ownerId: string): Promise<void> {
    await this.transaction(async (tx) => {
      await tx.unsafe(statements.deleteCommittedClaims, [ownerId])
      await tx.unsafe(statements.deleteConsumer, [ownerId])
    })
  }

  async listConsumers(): Promise<Owner[]> {
    const rows = await this.sql`
      SELECT owner_id, host, pid, boot_id, start_ticks FROM consumers WHERE root_id = ${this.rootId}`
    return (rows as RawOwner[]).map(toOwner)
  }

  async forgetConsumers(ownerIds: readonly string[]): Promise<void> {
    if (ownerIds.length === 0) return
    await this.sql`
      DELETE FROM consumers o
      WHERE o.root_id = ${this.rootId} AND o.owner_id = ANY (ARRAY(SELECT jsonb_array_elements_text(${ownerIds}::jsonb)))
        AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.owner_id = o.owner_id)`
  }

  /** Claims those of `names` nobody holds in this root, and forgets `forget` (committed claims whose files have left). */
  async claim(ownerId: string, names: readonly string[], now: string, forget: readonly Claim[] = []): Promise<Claim[]> {
    const rows = names.map((name, ord) => ({
      ord,
      name,
      claim_id: `${ownerId}.${(this.#claimCounter++).toString(36)}`,
    }))
    const gone = forget.map((c) => c.name)
    return this.transaction(async (tx) => {
      // Found through the primary key, one probe per name. A join with the list lets the planner
      // bitmap-scan the (owner_id, state) index instead, whose dead entries from every earlier
      // forget (a bitmap scan never marks them dead) make each batch slower than the last:
      // 150 ms a batch after 50k messages. A name's claim row is unique while it exists, so the
      // name, this owner and the committed state identify the very claim that was moved.
      if (forget.length > 0)
        await tx`
          DELETE FROM claims c
          WHERE c.root_id = ${this.rootId} AND c.name = ANY (ARRAY(SELECT jsonb_array_elements_text(${gone}::jsonb)))
            AND c.owner_id = ${ownerId} AND c.state = 'committed'`
      await tx.unsafe(statements.heartbeat, [now, ownerId])
      // Inserted in name order (one lock order for every consumer of the root), numbered in the
      // caller's order: seq_no is the claim order recovery redoes a crashed batch in, and it must
      // be the order the batch is processed in, or a retry could let another delivery of a
      // msg_id win. nextval in the sorted subquery runs after its sort, so it counts in `ord`.
      const claimed = await tx`
        INSERT INTO claims (root_id, name, seq_no, claim_id, owner_id, attempts, state, claimed_at)
        OVERRIDING SYSTEM VALUE
        SELECT ${this.rootId}, n.name, n.seq_no, n.claim_id, ${ownerId}, 1, 'claimed', ${now}
        FROM (
          SELECT t.name, t.claim_id, nextval(pg_get_serial_sequence('claims', 'seq_no')) AS seq_no
          FROM jsonb_to_recordset(${rows}::jsonb) AS t(ord integer, name text, claim_id text)
          ORDER BY t.ord
        ) n
        ORDER BY n.name
        ON CONFLICT (root_id, name) DO NOTHING
        RETURNING name, claim_id`
      const byName = new Map((claimed as { name: string; claim_id: string }[]).map((r) => [r.name, r.claim_id]))
      // Keep the caller's (directory) order.
      return rows
        .filter((r) => byName.get(r.name) === r.claim_id)
        .map((r) => ({ name: r.name, claimId: r.claim_id, attempts: 1 }))
    })
  }

  async release(ownerId: string, claims: readonly Claim[]): Promise<number> {
    if (claims.length === 0) return 0
    const rows = claims.map((c) => ({ name: c.name, claim_id: c.claimId }))
    const released = await this.sql`
      DELETE FROM claims c USING jsonb_to_recordset(${rows}::jsonb) AS t(name text, claim_id text)
      WHERE c.root_id = ${this.rootId} AND c.name = t.name AND c.claim_id = t.claim_id AND c.owner_id = ${ownerId}`
    return released.count
  }

  /** Commits a batch in one transaction (see commitBatch), fenced by claim owner. */
  commit(
    ownerId: string,
    all: readonly Outcome[],
    now: string,
    effect?: PostgresEffect,
    policy?: DeferPolicy,
  ): Promise<Verdict[]> {
    return this.transaction((tx) => commitBatch(tx, this.rootId, ownerId, all, now, effect, policy))
  }

  /** Claims due deferred files (see the SQLite ledger's claimDue), one row at a time in the order given. */
  async claimDue(
    ownerId: string,
    due: readonly Deferral[],
    now: string,
    forget: readonly Claim[] = [],
  ): Promise<Claim[]> {
    const rows = due.map((d) => ({ d, claimId: `${ownerId}.${(this.#claimCounter++).toString(36)}` }))
    return this.transaction(async (tx) => {
      if (forget.length > 0)
        await tx`
          DELETE FROM claims c
          WHERE c.root_id = ${this.rootId} AND c.name = ANY (ARRAY(SELECT jsonb_array_elements_text(${forget.map((c) => c.name)}::jsonb)))
            AND c.owner_id = ${ownerId} AND c.state = 'committed'`
      await tx.unsafe(statements.heartbeat, [now, ownerId])
      const claimed: Claim[] = []
      for (const { d, claimId } of rows) {
        const inserted = await tx`
          INSERT INTO claims (root_id, name, claim_id, owner_id, attempts, state, claimed_at)
          VALUES (${this.rootId}, ${d.file}, ${claimId}, ${ownerId}, 1, 'claimed', ${now})
          ON CONFLICT (root_id, name) DO NOTHING RETURNING claim_id`
        if (inserted.length === 0) continue
        const picked = await tx`
          UPDATE deferrals SET claim_id = ${claimId}
          WHERE root_id = ${this.rootId} AND file = ${d.file} AND claim_id = ${d.claimId} AND next_attempt_at <= ${now}`
        if (picked.count === 1) claimed.push({ name: d.file, claimId, attempts: 1 })
        else await tx`DELETE FROM claims WHERE root_id = ${this.rootId} AND name = ${d.file} AND claim_id = ${claimId}`
      }
      return claimed
    })
  }

  async dueDeferrals(now: string, limit: number): Promise<Deferral[]> {
    const rows = await this.sql`
      SELECT file, msg_id, attempts, first_deferred_at, next_attempt_at, last_error, claim_id FROM deferrals
      WHERE root_id = ${this.rootId} AND next_attempt_at <= ${now}
      ORDER BY next_attempt_at, file COLLATE "C" LIMIT ${limit}`
    return (rows as RawDeferral[]).map(toDeferral)
  }

  async nextDeferralAt(): Promise<string | undefined> {
    const [r] = await this.sql`SELECT min(next_attempt_at) AS at FROM deferrals WHERE root_id = ${this.rootId}`
    return (r?.at as string | null) ?? undefined
  }

  async deferralOf(claimId: string): Promise<Deferral | undefined> {
    const [r] = await this.sql`
      SELECT file, msg_id, attempts, first_deferred_at, next_attempt_at, last_error, claim_id FROM deferrals
      WHERE root_id = ${this.rootId} AND claim_id = ${claimId}`
    return r === undefined ? undefined : toDeferral(r as RawDeferral)
  }

  async renameDeferral(claimId: string, file: string): Promise<void> {
    await this.sql`UPDATE deferrals SET file = ${file} WHERE root_id = ${this.rootId} AND claim_id = ${claimId}`
  }

  async dropDeferral(claim: Claim, ownerId: string): Promise<void> {
    await this.transaction(async (tx) => {
      await tx`DELETE FROM deferrals WHERE root_id = ${this.rootId} AND file = ${claim.name} AND claim_id = ${claim.claimId}`
      await tx`
        DELETE FROM claims
        WHERE root_id = ${this.rootId} AND name = ${claim.name} AND claim_id = ${claim.claimId} AND owner_id = ${ownerId}`
    })
  }

  async deferralCounts(now: string): Promise<{ deferred: number; due: number }> {
    const [r] = await this.sql`
      SELECT count(*)::int AS deferred, (count(*) FILTER (WHERE next_attempt_at <= ${now}))::int AS due
      FROM deferrals WHERE root_id = ${this.rootId}`
    return { deferred: Number(r?.deferred ?? 0), due: Number(r?.due ?? 0) }
  }

  /** Every claim of this root with its owner's identity, in claim order. */
  async listClaims(): Promise<ClaimRow[]> {
    const rows = await this.sql`
      SELECT c.name, c.claim_id, c.owner_id, c.attempts, c.state, c.dest, c.dest_name, c.payload_hash,
             o.host, o.pid, o.boot_id, o.start_ticks, o.heartbeat_at
      FROM claims c LEFT JOIN consumers o ON o.owner_id = c.owner_id
      WHERE c.root_id = ${this.rootId} ORDER BY c.seq_no`
    return (rows as RawClaimRow[]).map(toClaimRow)
  }

  /**
   * Takes over dead owners' claims; only rows still naming the listed owner are taken. Each is
   * returned as it is once taken, not as it was listed: a consumer killed in the middle of its
   * commit leaves that transaction to the server, which may commit it after the listing (the
   * takeover waits on its row locks). Taken as listed, such a claim would look uncommitted,
   * and its file would be processed again and recorded as a duplicate of itself.
   */
  async adoptClaims(rows: readonly ClaimRow[], ownerId: string): Promise<ClaimRow[]> {
    if (rows.length === 0) return []
    const wanted = rows.map((r) => ({ name: r.name, claim_id: r.claimId, owner_id: r.ownerId }))
    const taken = (await this.transaction(
      (tx) => tx`
        UPDATE claims c SET owner_id = ${ownerId}
        FROM jsonb_to_recordset(${wanted}::jsonb) AS t(name text, claim_id text, owner_id text)
        WHERE c.root_id = ${this.rootId} AND c.name = t.name AND c.claim_id = t.claim_id
          AND c.owner_id IS NOT DISTINCT FROM t.owner_id
        RETURNING c.claim_id, c.attempts, c.state, c.dest, c.dest_name, c.payload_hash`,
    )) as (AdoptedRow & Pick<RawClaimRow, "claim_id">)[]
    const current = new Map(taken.map((r) => [r.claim_id, r]))
    return rows.flatMap((r): ClaimRow[] => {
      const t = current.get(r.claimId)
      return t === undefined ? [] : [{ ...r, ownerId, ...adopted(t) }]
    })
  }

  /** Counts one more attempt on a claim before it is processed alone (the poison counter). */
  async startAttempt(claim: Claim, ownerId: string): Promise<Claim> {
    await this.sql`
      UPDATE claims SET attempts = attempts + 1
      WHERE root_id = ${this.rootId} AND name = ${claim.name} AND claim_id = ${claim.claimId} AND owner_id = ${ownerId}`
    return { ...claim, attempts: claim.attempts + 1 }
  }

  async uncountAttempt(claim: Claim, ownerId: string): Promise<boolean> {
    const r = await this.sql`
      UPDATE claims SET attempts = attempts - 1
      WHERE root_id = ${this.rootId} AND name = ${claim.name} AND claim_id = ${claim.claimId}
        AND owner_id = ${ownerId} AND state = 'claimed' AND attempts > 1`
    return r.count === 1
  }

  /** PostgreSQL commits are durable one by one (synchronous_commit): nothing is deferred. */
  lazily<T>(fn: () => T): T {
    return fn()
  }

  /** Refreshes the owner's heartbeat (its lease, as seen from other hosts). */
  async flush(ownerId: string, now: string): Promise<void> {
    await this.sql.unsafe(statements.heartbeat, [now, ownerId])
  }

  async claimOrphan(name: string, ownerId: string, now: string): Promise<Claim | undefined> {
    return (await this.claim(ownerId, [name], now))[0]
  }

  async dropClaims(claims: readonly Claim[]): Promise<void> {
    if (claims.length === 0) return
    const rows = claims.map((c) => ({ name: c.name, claim_id: c.claimId }))
    await this.sql`
      DELETE FROM claims c USING jsonb_to_recordset(${rows}::jsonb) AS t(name text, claim_id text)
      WHERE c.root_id = ${this.rootId} AND c.name = t.name AND c.claim_id = t.claim_id`
  }

  /** Whether `ownerId` still holds this claim (a claim taken over or ended no longer is). */
  async holdsClaim(name: string, claimId: string, ownerId: string): Promise<boolean> {
    const rows = await this.sql`
      SELECT 1 FROM claims
      WHERE root_id = ${this.rootId} AND name = ${name} AND claim_id = ${claimId} AND owner_id = ${ownerId}`
    return rows.length > 0
  }

  async renameFailure(claimId: string, file: string): Promise<void> {
    await this.sql.unsafe(statements.renameFailure, [file, claimId])
  }

  /** The distinct msg_ids ever seen as duplicates (by any root), ascending by code point. */
  async *duplicateIds(): AsyncGenerator<string> {
    let after = ""
    let first = true
    for (;;) {
      const rows = (await this.sql`
        SELECT DISTINCT msg_id COLLATE "C" AS msg_id FROM duplicates
        WHERE ${first} OR msg_id COLLATE "C" > ${after}
        ORDER BY 1 LIMIT 10000`) as { msg_id: string }[]
      for (const r of rows) yield r.msg_id
      if (rows.length < 10000) return
      after = (rows.at(-1) as { msg_id: string }).msg_id
      first = false
    }
  }

  /** Every conflicting redelivery with the delivery that was processed, by msg_id. */
  async *conflicts(): AsyncGenerator<ConflictRow> {
    const rows = await this.sql`
      SELECT d.msg_id, d.file, d.content_hash, p.file AS processed_file, p.content_hash AS processed_content_hash
      FROM duplicates d JOIN processed p ON p.msg_id = d.msg_id
      WHERE d.is_conflict = 1 ORDER BY d.msg_id COLLATE "C", d.id`
    yield* rows as ConflictRow[]
  }

  /** The reason of the latest unreplayed failure recorded under `file` in this root's error/. */
  async failureReason(file: string): Promise<string | undefined> {
    const [row] = await this.sql`
      SELECT reason FROM failures WHERE root_id = ${this.rootId} AND file = ${file} AND replayed_at IS NULL
      ORDER BY id DESC LIMIT 1`
    return row?.reason as string | undefined
  }

  /** The latest unreplayed failure recorded under `file` in this root's error/. */
  async unreplayedFailure(file: string): Promise<FailureRecord | undefined> {
    const [row] = await this.sql`
      SELECT reason, payload_hash AS "payloadHash", failed_at AS "failedAt" FROM failures
      WHERE root_id = ${this.rootId} AND file = ${file} AND replayed_at IS NULL
      ORDER BY id DESC LIMIT 1`
    return row as FailureRecord | undefined
  }

  /** The reason of the latest unreplayed failure of every file this root has recorded in error/. */
  async failureReasons(): Promise<Map<string, string>> {
    const rows = (await this.sql`
      SELECT DISTINCT ON (file) file, reason FROM failures
      WHERE root_id = ${this.rootId} AND replayed_at IS NULL ORDER BY file, id DESC`) as {
      file: string
      reason: string
    }[]
    return new Map(rows.map((r) => [r.file, r.reason]))
  }

  /** The latest unreplayed failure recorded under each of `files` in this root's error/ (those that have one). */
  async unreplayedFailures(files: readonly string[]): Promise<Map<string, FailureRecord>> {
    const rows = (await this.sql`
      SELECT DISTINCT ON (file) file, reason, payload_hash AS "payloadHash", failed_at AS "failedAt" FROM failures
      WHERE root_id = ${this.rootId} AND replayed_at IS NULL
        AND file IN (SELECT jsonb_array_elements_text(${files}::jsonb))
      ORDER BY file, id DESC`) as (FailureRecord & { file: string })[]
    return new Map(rows.map((r) => [r.file, { reason: r.reason, payloadHash: r.payloadHash, failedAt: r.failedAt }]))
  }

  /** Every row of this root matching `keys` (see LedgerHistory), in one repeatable-read snapshot. */
  history(keys: HistoryKeys): Promise<LedgerHistory> {
    const root = this.rootId
    return this.sql.begin("ISOLATION LEVEL REPEATABLE READ READ ONLY", async (tx) => {
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
        SELECT id, file, original, reason, detail, payload_hash, claim_id, failed_at, replayed_at FROM failures
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
   * Runs `fn` while holding this root's report lock, so consumers of one root write their
   * reports one after the other and the last one written reflects every commit before it.
   */
  async withReportLock<T>(fn: () => Promise<T>): Promise<T> {
    return this.transaction(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(hashtext(${`spool-reports:${this.rootId}`}))`
      return fn()
    })
  }

  /** How many replays of `file` this root has logged (a bulk replay's --max-replays count). */
  replayCount(file: string): Promise<number> {
    return replaysOf(this.sql, this.rootId, file)
  }

  /** Marks the failure record of a file replayed from error/ and logs the replay. */
  markReplayed(file: string, now: string): Promise<boolean> {
    return this.transaction((tx) => markFailure(tx, this.rootId, file, now))
  }

  /**
   * A replay's ledger half around its move (see LedgerPort), under a transaction-scoped
   * advisory lock on this root's file name, so two hosts replaying the same file at once cannot
   * both pass the limit (there may be no failure row to lock).
   */
  recordReplay(
    file: string,
    now: string,
    move: () => void,
    maxReplays = Number.POSITIVE_INFINITY,
  ): Promise<ReplayRecord> {
    return this.transaction(async (tx): Promise<ReplayRecord> => {
      await tx`SELECT pg_advisory_xact_lock(hashtext(${`spool-replay:${this.rootId}:${file}`}))`
      const count = await replaysOf(tx, this.rootId, file)
      if (count >= maxReplays) return { kind: "too-often", count }
      const isRecordMarked = await markFailure(tx, this.rootId, file, now)
      move()
      return { kind: "replayed", isRecordMarked }
    })
  }

  /**
   * The statistics of `stats` (sql/stats.sql) over the whole ledger, every root's deliveries, as
   * deduplication is the ledger's: in one repeatable-read snapshot.
   */
  stats(since: Date): Promise<LedgerStats> {
    return readSharedStats(this.sql, since)
  }

  /** The result the effect of `msgId`'s processing returned; undefined when none was stored or the msg_id is unknown. */
  async resultOf(msgId: string): Promise<unknown> {
    const [row] = await this.sql.unsafe(statements.resultOf, [msgId])
    return parseResult(row?.result as string | null | undefined)
  }

  /** Runs order-check.sql exactly as checked in (the same file the sqlite3 shell runs). */
  async orderProblems(): Promise<OrderProblem[]> {
    const rows = (await this.sql.unsafe(orderCheckSql)) as { order_no: string; seq: string | number; problem: string }[]
    return rows.map((r) => ({
      order_no: r.order_no,
      seq: Number(r.seq),
      problem: r.problem as OrderProblem["problem"],
    }))
  }

  /**
   * Retention, as the SQLite ledger's compact, over the whole ledger: every root's history and
   * keys (deduplication and the horizon are the ledger's, not one root's, and a root whose host
   * is gone is pruned too). With `dryRun` the same statements run and are rolled back, so the
   * counts are exactly what a real run removes.
   */
  async compact(
    historyCutoff: string,
    keyCutoff: string | undefined,
    now: string,
    options: { dryRun?: boolean } = {},
  ): Promise<CompactSummary> {
    if (!options.dryRun) return this.transaction((tx) => pruneIn(tx, historyCutoff, keyCutoff, now))
    return this.transaction(async (tx) => {
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

  /** amcheck on spool's indexes when installed, then spool's consistency checks (sql/postgres/verify.sql). */
  verify(): Promise<LedgerCheck[]> {
    return verifyPostgres(this.sql)
  }

  async close(): Promise<void> {
    await this.sql.close()
  }
}

const rollback = new Error("roll back the dry run")

async function replaysOf(sql: SQL, rootId: string, file: string): Promise<number> {
  const [row] = await sql`SELECT COUNT(*)::int AS n FROM replays WHERE root_id = ${rootId} AND file = ${file}`
  return row.n as number
}

/** Marks the latest unreplayed failure of `file` replayed and logs the replay, in the caller's transaction. */
async function markFailure(tx: SQL, rootId: string, file: string, now: string): Promise<boolean> {
  const [row] = await tx`
    SELECT id FROM failures WHERE root_id = ${rootId} AND file = ${file} AND replayed_at IS NULL
    ORDER BY id DESC LIMIT 1 FOR UPDATE`
  await tx`INSERT INTO replays (root_id, file, failure_id, replayed_at) VALUES (${rootId}, ${file}, ${row?.id ?? null}, ${now})`
  if (!row) return false
  await tx`UPDATE failures SET replayed_at = ${now} WHERE id = ${row.id}`
  return true
}

/** compact's statements (ledger-statements.ts), in the caller's transaction or savepoint. */
function pruneIn(tx: SQL, historyCutoff: string, keyCutoff: string | undefined, now: string): Promise<CompactSummary> {
  return runStepsAsync(
    prune(historyCutoff, keyCutoff, now),
    async (statement, params) => (await tx.unsafe(statement, [...params])).count,
  )
}
