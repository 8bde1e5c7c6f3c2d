import type { SQL, TransactionSQL } from "bun"
import { SpoolError } from "../../errors.ts"
import type { Owner } from "../../queue/owner.ts"
import type { DeferPolicy } from "../../transient.ts"
import type { HistoryKeys, LedgerHistory } from "../history.ts"
import {
  type AcceptedOutcome,
  type Claim,
  type ClaimRow,
  type ConflictRow,
  type Deferral,
  type DeletionDir,
  type DeletionRecord,
  type FailureOrigin,
  type FailureRecord,
  type Landing,
  type OrderCheck,
  type Outcome,
  type RawOwner,
  type ReplayRecord,
  toOwner,
  type Verdict,
} from "../model.ts"
import type { LedgerPort } from "../port.ts"
import { statements } from "../statements.ts"
import type { LedgerStats } from "../stats.ts"
import { parseResult } from "../verdicts.ts"
import type { LedgerCheck } from "../verify.ts"
import { pgArray } from "./arrays.ts"
import * as claims from "./claims.ts"
import { commitBatch } from "./commit.ts"
import * as deferrals from "./deferrals.ts"
import { recordDeletion } from "./deletions.ts"
import { asLedgerError, redact, translateFailures } from "./errors.ts"
import * as landings from "./landings.ts"
import * as lease from "./lease.ts"
import { connect, defaultBusyTimeoutMs } from "./open.ts"
import * as operator from "./operator.ts"
import { inOneRoundTrip, inTransaction } from "./retry.ts"
import { ledgerIdOf, migrate, versionOf } from "./schema.ts"
import { readSharedStats } from "./stats.ts"
import { ClaimsVacuum } from "./vacuum.ts"
import { verifyPostgres } from "./verify.ts"

export { redact } from "./errors.ts"

/**
 * A business effect on the PostgreSQL ledger: runs inside the commit transaction, in a savepoint
 * of its own. What it returns or resolves to (JSON-serialisable) is stored with the processed row.
 */
export type PostgresEffect = (outcome: AcceptedOutcome, tx: SQL) => unknown

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
  readonly vacuum: ClaimsVacuum
  #claimCounter = 0

  private constructor(sql: SQL, url: string, rootId: string, busyTimeoutMs: number) {
    this.sql = sql
    this.url = url
    this.rootId = rootId
    this.busyTimeoutMs = busyTimeoutMs
    this.vacuum = new ClaimsVacuum(sql)
  }

  /**
   * Connects, and creates or upgrades the schema (one migrator at a time, under an advisory lock).
   * Every session waits at most `busyTimeoutMs` (default 10 s) for a lock, as SQLite's busy timeout.
   */
  static async open(
    url: string,
    rootId: string | (() => string),
    options: { migrate?: boolean; busyTimeoutMs?: number } = {},
  ): Promise<PostgresLedger> {
    const busyTimeoutMs = options.busyTimeoutMs ?? defaultBusyTimeoutMs
    const sql = connect(url, busyTimeoutMs)
    try {
      if (options.migrate !== false) await migrate(sql)
      else if ((await versionOf(sql)) === 0)
        throw new SpoolError("ledger", `${redact(url)} has no spool ledger yet; run consume first`)
    } catch (error) {
      await sql.close().catch(() => {})
      throw asLedgerError(error, url, busyTimeoutMs)
    }
    // A root id to be made is made only once the server has answered; failing, it is the file system's error.
    try {
      return new PostgresLedger(sql, url, typeof rootId === "string" ? rootId : rootId(), busyTimeoutMs)
    } catch (error) {
      await sql.close().catch(() => {})
      throw error
    }
  }

  /** This ledger's identity (see identify in open.ts). */
  ledgerId(): Promise<string | undefined> {
    return ledgerIdOf(this.sql)
  }

  /** Runs `fn` in a transaction, retrying it whole on deadlock or serialization failure. */
  transaction<T>(fn: (tx: TransactionSQL) => Promise<T>): Promise<T> {
    return inTransaction(this.sql, fn)
  }

  /** The statements `build` makes as one transaction in one round trip (see `inOneRoundTrip`). */
  pipelined(build: (q: SQL) => readonly (PromiseLike<unknown> | undefined)[]): Promise<unknown[]> {
    return inOneRoundTrip(this.sql, build)
  }

  #nextClaimId(ownerId: string): string {
    return `${ownerId}.${(this.#claimCounter++).toString(36)}`
  }

  /** Flushed, unlike SQLite's: see LedgerPort.registerConsumer. */
  async registerConsumer(o: Owner, now: string): Promise<void> {
    await this.sql.unsafe(lease.register, [o.ownerId, this.rootId, o.host, o.pid, o.bootId, o.startTicks, now])
  }

  /** Without waiting for the WAL flush (see LedgerPort.unregisterConsumer), in one round trip. */
  async unregisterConsumer(ownerId: string): Promise<void> {
    await this.pipelined((q) => [
      q`SET LOCAL synchronous_commit = off`,
      q.unsafe(statements.deleteCommittedClaims, [ownerId]),
      q.unsafe(statements.deleteConsumer, [ownerId]),
    ])
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
  claim(ownerId: string, names: readonly string[], now: string, forget: readonly Claim[] = []): Promise<Claim[]> {
    const rows = names.map((name) => ({ name, claim_id: this.#nextClaimId(ownerId) }))
    return claims.claim(this, ownerId, rows, now, forget, undefined, true)
  }

  /** Claims landed deliveries in this root: each free name's claim row with its attempts, and its origins row. */
  claimLanded(
    ownerId: string,
    taken: readonly Landing[],
    now: string,
    forget: readonly Claim[] = [],
  ): Promise<Claim[]> {
    const rows = taken.map((l) => ({ name: l.name, claim_id: this.#nextClaimId(ownerId) }))
    return landings.claimLanded(this, ownerId, rows, taken, now, forget)
  }

  failureOrigin(file: string): Promise<FailureOrigin | undefined> {
    return landings.failureOrigin(this, file)
  }

  committedLandings(pairs: readonly { readonly name: string; readonly payloadHash: string }[]): Promise<Set<string>> {
    return landings.committedLandings(this, pairs)
  }

  landedClaims(claimIds: readonly string[]): Promise<Set<string>> {
    return landings.landedClaims(this, claimIds)
  }

  async release(ownerId: string, claims: readonly Claim[]): Promise<number> {
    if (claims.length === 0) return 0
    const released = await this.sql`
      DELETE FROM claims c USING unnest(${pgArray(claims.map((c) => c.name))}::text[], ${pgArray(claims.map((c) => c.claimId))}::text[]) AS t(name, claim_id)
      WHERE c.root_id = ${this.rootId} AND c.name = ANY (${pgArray(claims.map((c) => c.name))}::text[])
        AND c.name = t.name AND c.claim_id = t.claim_id AND c.owner_id = ${ownerId}`
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
    const rows = due.map((d) => ({ d, claimId: this.#nextClaimId(ownerId) }))
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
  listClaims(): Promise<ClaimRow[]> {
    return claims.listClaims(this)
  }

  /** Takes over dead owners' claims (see claims.ts): each returned as the takeover found it. */
  adoptClaims(rows: readonly ClaimRow[], ownerId: string): Promise<ClaimRow[]> {
    return claims.adoptClaims(this, rows, ownerId)
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
    await this.sql`
      DELETE FROM claims c USING unnest(${pgArray(claims.map((c) => c.name))}::text[], ${pgArray(claims.map((c) => c.claimId))}::text[]) AS t(name, claim_id)
      WHERE c.root_id = ${this.rootId} AND c.name = ANY (${pgArray(claims.map((c) => c.name))}::text[])
        AND c.name = t.name AND c.claim_id = t.claim_id`
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

  /** The reason of the latest open failure recorded under `file` in this root's error/. */
  async failureReason(file: string): Promise<string | undefined> {
    return (await this.unreplayedFailure(file))?.reason
  }

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
  withReportLock<T>(fn: () => Promise<T>): Promise<T> {
    return operator.withReportLock(this, fn)
  }

  /** How many replays of `file` this root has logged (a bulk replay's --max-replays count). */
  replayCount(file: string): Promise<number> {
    return operator.replaysOf(this.sql, this.rootId, file)
  }

  /** The sources of the broker deliveries whose origins this root still keeps, sorted. */
  async landedSources(): Promise<string[]> {
    const rows = await this.sql`
      SELECT DISTINCT source FROM origins WHERE root_id = ${this.rootId} ORDER BY source`
    return (rows as { source: string }[]).map((r) => r.source)
  }

  /** Marks the failure record of a file replayed from error/ and logs the replay. */
  markReplayed(file: string, now: string): Promise<boolean> {
    return this.transaction((tx) => operator.markFailure(tx, this.rootId, file, now))
  }

  recordReplay(file: string, now: string, move: () => void, maxReplays?: number): Promise<ReplayRecord> {
    return operator.recordReplay(this, file, now, move, maxReplays)
  }

  recordDeletion(file: string, dir: DeletionDir, now: string, remove: () => void): Promise<DeletionRecord> {
    return recordDeletion(this, file, dir, now, remove)
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

  orderCheck(maxRows: number): Promise<OrderCheck> {
    return operator.orderCheck(this, maxRows)
  }

  compact(historyCutoff: string, keyCutoff: string | undefined, now: string, o: { dryRun?: boolean } = {}) {
    return operator.compact(this, historyCutoff, keyCutoff, now, o)
  }

  /** amcheck on spool's indexes when installed, then spool's consistency checks (sql/postgres/verify.sql). */
  verify(): Promise<LedgerCheck[]> {
    return verifyPostgres(this.sql)
  }

  async close(): Promise<void> {
    await this.vacuum.finished()
    await this.sql.close()
  }
}

// Every query of every method, the engine's and the operator commands', fails through the one
// translation: what happened (locked past the busy timeout, a statement cancelled, the session
// ended) and what to do, as a SpoolError the engine hands back files for.
translateFailures(PostgresLedger, (ledger: PostgresLedger, error) =>
  asLedgerError(error, ledger.url, ledger.busyTimeoutMs),
)
