import { SQL, type TransactionSQL } from "bun"
import { SpoolError } from "../../errors.ts"
import type { Owner } from "../../queue/owner.ts"
import type { DeferPolicy } from "../../transient.ts"
import type { HistoryKeys, LedgerHistory } from "../history.ts"
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
  type RawOwner,
  type ReplayRecord,
  toClaimRow,
  toOwner,
  type Verdict,
} from "../model.ts"
import type { LedgerPort } from "../port.ts"
import { statements } from "../statements.ts"
import type { LedgerStats } from "../stats.ts"
import { parseResult } from "../verdicts.ts"
import type { LedgerCheck } from "../verify.ts"
import { commitBatch } from "./commit.ts"
import * as deferrals from "./deferrals.ts"
import { asLedgerError, pgCode, redact, sessionSettings, translateFailures } from "./errors.ts"
import * as lease from "./lease.ts"
import * as operator from "./operator.ts"
import { ledgerIdOf, migrate, versionOf } from "./schema.ts"
import { readSharedStats } from "./stats.ts"
import { verifyPostgres } from "./verify.ts"

export { redact } from "./errors.ts"

/**
 * A business effect on the PostgreSQL ledger: runs inside the commit transaction, in a savepoint
 * of its own. What it returns or resolves to (JSON-serialisable) is stored with the processed row.
 */
export type PostgresEffect = (outcome: AcceptedOutcome, tx: SQL) => unknown

// Deadlocks and serialization failures are retried: the transaction rolled back whole.
const RETRYABLE = new Set(["40P01", "40001"])

/** The busy timeout of a ledger opened without one: consume's --busy-timeout default. */
const defaultBusyTimeoutMs = 10_000

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
  /** How long any statement of this ledger's sessions waits for a lock (their lock_timeout). */
  readonly busyTimeoutMs: number
  #claimCounter = 0

  private constructor(sql: SQL, url: string, rootId: string, busyTimeoutMs: number) {
    this.sql = sql
    this.url = url
    this.rootId = rootId
    this.busyTimeoutMs = busyTimeoutMs
  }

  /**
   * Connects, and creates or upgrades the schema (one migrator at a time, under an advisory lock).
   * Every session waits at most `busyTimeoutMs` (default 10 s) for a lock, as SQLite's busy timeout.
   */
  static async open(
    url: string,
    rootId: string,
    options: { migrate?: boolean; busyTimeoutMs?: number } = {},
  ): Promise<PostgresLedger> {
    const busyTimeoutMs = options.busyTimeoutMs ?? defaultBusyTimeoutMs
    const sql = new SQL({
      url,
      max: 2,
      idleTimeout: 30,
      connectionTimeout: 10,
      connection: sessionSettings(busyTimeoutMs),
    })
    const ledger = new PostgresLedger(sql, url, rootId, busyTimeoutMs)
    try {
      if (options.migrate !== false) await migrate(sql)
      else if ((await ledger.version()) === 0)
        throw new SpoolError("ledger", `${redact(url)} has no spool ledger yet; run consume first`)
    } catch (error) {
      await sql.close().catch(() => {})
      throw asLedgerError(error, url, busyTimeoutMs)
    }
    return ledger
  }

  /** Whether spool has set up a ledger in the database at `url` (read without creating or changing anything). */
  static async isSetUp(url: string): Promise<boolean> {
    const sql = new SQL({ url, max: 1, connectionTimeout: 10, connection: sessionSettings(defaultBusyTimeoutMs) })
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
    const sql = new SQL({ url, max: 1, connectionTimeout: 10, connection: sessionSettings(defaultBusyTimeoutMs) })
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
  async transaction<T>(fn: (tx: TransactionSQL) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return (await this.sql.begin((tx) => fn(tx))) as T
      } catch (error) {
        const code = pgCode(error)
        if (code !== undefined && RETRYABLE.has(code) && attempt < 8) {
          await Bun.sleep(Math.random() * 20 * attempt)
          continue
        }
        throw error
      }
    }
  }

  async registerConsumer(owner: Owner, now: string): Promise<void> {
    await this.sql.unsafe(lease.register, [
      owner.ownerId,
      this.rootId,
      owner.host,
      owner.pid,
      owner.bootId,
      owner.startTicks,
      now,
    ])
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
      await tx.unsafe(lease.heartbeat, [ownerId])
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
  claimDue(ownerId: string, due: readonly Deferral[], now: string, forget: readonly Claim[] = []): Promise<Claim[]> {
    const rows = due.map((d) => ({ d, claimId: `${ownerId}.${(this.#claimCounter++).toString(36)}` }))
    return deferrals.claimDue(this, ownerId, rows, now, forget)
  }

  dueDeferrals(now: string, limit: number): Promise<Deferral[]> {
    return deferrals.dueDeferrals(this, now, limit)
  }

  nextDeferralAt(): Promise<string | undefined> {
    return deferrals.nextDeferralAt(this)
  }

  deferralOf(claimId: string): Promise<Deferral | undefined> {
    return deferrals.deferralOf(this, claimId)
  }

  deferralsAt(files: readonly string[]): Promise<Map<string, Deferral>> {
    return deferrals.deferralsAt(this, files)
  }

  renameDeferral(claimId: string, file: string): Promise<void> {
    return deferrals.renameDeferral(this, claimId, file)
  }

  dropDeferral(claim: Claim, ownerId: string): Promise<void> {
    return deferrals.dropDeferral(this, claim, ownerId)
  }

  deferralCounts(now: string): Promise<{ deferred: number; due: number }> {
    return deferrals.deferralCounts(this, now)
  }

  /** Every claim of this root with its owner's identity, in claim order. */
  async listClaims(): Promise<ClaimRow[]> {
    const rows = await this.sql`
      SELECT c.name, c.claim_id, c.owner_id, c.attempts, c.state, c.dest, c.dest_name, c.payload_hash,
             o.host, o.pid, o.boot_id, o.start_ticks, o.heartbeat_at, ${this.sql.unsafe(lease.heartbeatAgeMs)} AS heartbeat_age_ms
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

  /** Refreshes the owner's heartbeat (its lease, as seen from other hosts), by the server's clock. */
  async flush(ownerId: string, _now: string): Promise<void> {
    await this.sql.unsafe(lease.heartbeat, [ownerId])
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
  duplicateIds(): AsyncGenerator<string> {
    return operator.duplicateIds(this)
  }

  /** Every conflicting redelivery with the delivery that was processed, by msg_id. */
  conflicts(): AsyncGenerator<ConflictRow> {
    return operator.conflicts(this)
  }

  /** The reason of the latest unreplayed failure recorded under `file` in this root's error/. */
  async failureReason(file: string): Promise<string | undefined> {
    return (await this.unreplayedFailure(file))?.reason
  }

  /** The latest unreplayed failure recorded under `file` in this root's error/. */
  async unreplayedFailure(file: string): Promise<FailureRecord | undefined> {
    return (await this.unreplayedFailures([file])).get(file)
  }

  failureReasons(): Promise<Map<string, string>> {
    return operator.failureReasons(this)
  }

  unreplayedFailures(files: readonly string[]): Promise<Map<string, FailureRecord>> {
    return operator.unreplayedFailures(this, files)
  }

  history(keys: HistoryKeys): Promise<LedgerHistory> {
    return operator.history(this, keys)
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
    return operator.replaysOf(this.sql, this.rootId, file)
  }

  /** Marks the failure record of a file replayed from error/ and logs the replay. */
  markReplayed(file: string, now: string): Promise<boolean> {
    return this.transaction((tx) => operator.markFailure(tx, this.rootId, file, now))
  }

  recordReplay(file: string, now: string, move: () => void, maxReplays?: number): Promise<ReplayRecord> {
    return operator.recordReplay(this, file, now, move, maxReplays)
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

  orderProblems(): Promise<OrderProblem[]> {
    return operator.orderProblems(this)
  }

  compact(
    historyCutoff: string,
    keyCutoff: string | undefined,
    now: string,
    options: { dryRun?: boolean } = {},
  ): Promise<CompactSummary> {
    return operator.compact(this, historyCutoff, keyCutoff, now, options)
  }

  /** amcheck on spool's indexes when installed, then spool's consistency checks (sql/postgres/verify.sql). */
  verify(): Promise<LedgerCheck[]> {
    return verifyPostgres(this.sql)
  }

  async close(): Promise<void> {
    await this.sql.close()
  }
}

// Every query of every method, the engine's and the operator commands', fails through the one
// translation: what happened (locked past the busy timeout, a statement cancelled, the session
// ended) and what to do, as a SpoolError the engine hands back files for.
translateFailures(PostgresLedger, (ledger: PostgresLedger, error) =>
  asLedgerError(error, ledger.url, ledger.busyTimeoutMs),
)
