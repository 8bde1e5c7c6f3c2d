import type { Database } from "bun:sqlite"
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
  type DeletionDir,
  type DeletionRecord,
  type FailureOrigin,
  type FailureRecord,
  type Landing,
  type OrderCheck,
  type Outcome,
  type RawClaimRow,
  type RawOwner,
  type ReplayRecord,
  toClaimRow,
  toOwner,
  type Verdict,
} from "../model.ts"
import type { LedgerPort } from "../port.ts"
import type { LedgerStats } from "../stats.ts"
import { parseResult } from "../verdicts.ts"
import type { LedgerCheck } from "../verify.ts"
import * as claims from "./claims.ts"
import { commitBatch } from "./commit.ts"
import * as deferrals from "./deferrals.ts"
import { recordDeletion } from "./deletions.ts"
import { asLedgerError } from "./errors.ts"
import { type LedgerOptions, openDatabase } from "./open.ts"
import * as operator from "./operator.ts"
import { prepare } from "./schema.ts"
import { readStats } from "./stats.ts"
import { verifySqlite } from "./verify.ts"

// The domain types, where callers of the SQLite ledger have always found them.
export * from "../model.ts"
export type { LedgerOptions } from "./open.ts"
export { schemaVersion } from "./schema.ts"

/**
 * A business effect that runs inside the commit transaction of a message processed for the
 * first time (never for a duplicate); its writes commit or roll back with the ledger's. If it
 * throws, its writes and the processed row are rolled back and the message goes to error/
 * with reason `handler`; the rest of the batch commits. What it returns (JSON-serialisable,
 * synchronously) is stored with the processed row: `resultOf` reads it back for a redelivery.
 */
export type Effect = (outcome: AcceptedOutcome, db: Database) => unknown

/** The SQLite ledger: one file next to the queue, WAL mode, short IMMEDIATE transactions. */
export class SqliteLedger implements LedgerPort<Effect> {
  readonly backend = "sqlite" as const
  /** A failed transaction rolled back in this process: nothing of it is left to find out. */
  readonly isFailedCommitInDoubt = false
  readonly db: Database
  readonly path: string
  #claimCounter = 0
  readonly #s: ReturnType<typeof prepare>
  readonly #claims: claims.ClaimTransactions

  private constructor(db: Database, path: string) {
    this.db = db
    this.path = path
    this.#s = prepare(db)
    this.#claims = {
      s: this.#s,
      nextClaimId: (ownerId) => `${ownerId}.${(this.#claimCounter++).toString(36)}`,
      lazily: (fn) => this.lazily(fn),
      transaction: (fn) => this.transaction(fn),
    }
  }

  /** Opens the ledger at `path` (`ROOT/ledger.db`), by openDatabase's rules. */
  static open(path: string, options: LedgerOptions = {}): SqliteLedger {
    return new SqliteLedger(openDatabase(path, options), path)
  }

  /** Runs `fn` in a BEGIN IMMEDIATE transaction: the write lock is taken up front, so COMMIT cannot hit a busy lock. */
  transaction<T>(fn: () => T): T {
    try {
      return this.db.transaction(fn).immediate()
    } catch (error) {
      throw asLedgerError(error, this.path)
    }
  }

  /** Lazily, the log not flushed for it: see LedgerPort.registerConsumer. */
  registerConsumer(owner: Owner, now: string): void {
    this.lazily(() =>
      this.transaction(() => {
        this.#s.registerConsumer.run(owner.ownerId, owner.host, owner.pid, owner.bootId, owner.startTicks, now, now)
      }),
    )
  }

  /** Lazily, the log not flushed for it: see LedgerPort.unregisterConsumer. */
  unregisterConsumer(ownerId: string): void {
    this.lazily(() =>
      this.transaction(() => {
        this.#s.deleteCommittedClaims.run(ownerId)
        this.#s.unregisterConsumer.run(ownerId)
      }),
    )
  }

  listConsumers(): Owner[] {
    return (this.#s.listConsumers.all() as RawOwner[]).map(toOwner)
  }

  forgetConsumers(ownerIds: readonly string[]): void {
    if (ownerIds.length === 0) return
    this.transaction(() => {
      for (const id of ownerIds) this.#s.forgetConsumer.run(id)
    })
  }

  /**
   * Claims those of `names` that nobody holds, for `ownerId`, in one transaction. The same
   * transaction forgets `forget`: committed claims whose files have durably left processing/.
   */
  claim(ownerId: string, names: readonly string[], now: string, forget: readonly Claim[] = []): Claim[] {
    return claims.claimEach(this.#claims, ownerId, names, now, forget)
  }

  /** Claims landed deliveries: each free name's claim row with its attempts, and its origins row. */
  claimLanded(ownerId: string, landings: readonly Landing[], now: string, forget: readonly Claim[] = []): Claim[] {
    return claims.claimLanded(this.#claims, ownerId, landings, now, forget)
  }

  failureOrigin(file: string): FailureOrigin | undefined {
    return claims.failureOrigin(this.#s, file)
  }

  committedLandings(pairs: readonly { readonly name: string; readonly payloadHash: string }[]): Set<string> {
    return claims.committedLandings(this.#s, pairs)
  }

  landedClaims(claimIds: readonly string[]): Set<string> {
    return claims.landedClaims(this.#s, claimIds)
  }

  /** Gives up claims `ownerId` still holds (its files vanished, or go back to inbox/); returns how many. */
  release(ownerId: string, claims: readonly Claim[]): number {
    if (claims.length === 0) return 0
    return this.transaction(() => {
      let n = 0
      for (const c of claims) n += this.#s.releaseClaim.run(c.name, c.claimId, ownerId).changes
      return n
    })
  }

  /**
   * Commits a batch of outcomes in one transaction (see commitBatch). Fenced: an outcome whose
   * claim `ownerId` no longer holds records nothing and is `lost`.
   */
  commit(ownerId: string, outcomes: readonly Outcome[], now: string, effect?: Effect, policy?: DeferPolicy): Verdict[] {
    return this.transaction(() => commitBatch(this.db, this.#s, ownerId, outcomes, now, effect, policy))
  }

  /** Claims due deferred files, like `claim`, each only while still the one listed and due (see claims.ts). */
  claimDue(ownerId: string, due: readonly Deferral[], now: string, forget: readonly Claim[] = []): Claim[] {
    return claims.claimDue(this.#claims, ownerId, due, now, forget)
  }

  /** The deferrals due at `now`, earliest first, at most `limit`. */
  dueDeferrals(now: string, limit: number): Deferral[] {
    return deferrals.dueDeferrals(this.#s, now, limit)
  }

  /** When the earliest deferred file falls due; undefined when none waits. */
  nextDeferralAt(): string | undefined {
    return (this.#s.nextDeferral.get() as { at: string | null }).at ?? undefined
  }

  /** The deferrals row a claim holds, if any. */
  deferralOf(claimId: string): Deferral | undefined {
    return deferrals.deferralOf(this.#s, claimId)
  }

  /** The deferrals rows of these names in deferred/, by name. */
  deferralsAt(files: readonly string[]): Map<string, Deferral> {
    return deferrals.deferralsAt(this.#s, files)
  }

  /** Records the final name of a file in deferred/ when the chosen one was taken at move time. */
  renameDeferral(claimId: string, file: string): void {
    this.transaction(() => this.#s.renameDeferral.run(file, claimId))
  }

  /** Forgets a picked-up deferrals row whose file was not in deferred/, and gives up its claim. */
  dropDeferral(claim: Claim, ownerId: string): void {
    this.transaction(() => {
      this.#s.dropDeferral.run(claim.name, claim.claimId)
      this.#s.releaseClaim.run(claim.name, claim.claimId, ownerId)
    })
  }

  /** How many deferrals rows there are, and how many of them are due at `now`. */
  deferralCounts(now: string): { deferred: number; due: number } {
    return this.#s.countDeferrals.get(now) as { deferred: number; due: number }
  }

  compact(
    historyCutoff: string,
    keyCutoff: string | undefined,
    now: string,
    options: { dryRun?: boolean } = {},
  ): CompactSummary {
    return operator.compact(this, historyCutoff, keyCutoff, now, options)
  }

  /**
   * Every claim with its owner's identity, in claim order (rowid), for recovery: a crashed
   * batch is redone in the order it was first processed, so duplicates resolve the same way.
   */
  listClaims(): ClaimRow[] {
    return (this.#s.listClaims.all() as RawClaimRow[]).map(toClaimRow)
  }

  /**
   * Takes over the claims of dead owners, in one transaction. A row is taken only if it still
   * names the owner it was listed with, so when two consumers recover at once each claim goes
   * to exactly one of them. Returns the rows taken, now owned by `ownerId`, in claim order,
   * each in the state the takeover found, not the one listed: an owner judged dead after the
   * listing may have committed in between (a consumer that was only stopped, resumed, committed
   * and then died), and its committed files must be moved, never processed again.
   */
  adoptClaims(rows: readonly ClaimRow[], ownerId: string): ClaimRow[] {
    if (rows.length === 0) return []
    return this.transaction(() =>
      rows.flatMap((row): ClaimRow[] => {
        const t = this.#s.adoptClaim.get(ownerId, 0, row.name, row.claimId, row.ownerId) as AdoptedRow | null
        return t === null ? [] : [{ ...row, ownerId, ...adopted(t) }]
      }),
    )
  }

  /**
   * Counts one more attempt on a claim just before its file is read on its own: the poison
   * counter. Process-crash durable only (synchronous=NORMAL): a power cut can lose the count,
   * which costs one more attempt, never a wrong verdict, and saves an fsync per file.
   */
  startAttempt(claim: Claim, ownerId: string): Claim {
    this.lazily(() => this.transaction(() => this.#s.adoptClaim.run(ownerId, 1, claim.name, claim.claimId, ownerId)))
    return { ...claim, attempts: claim.attempts + 1 }
  }

  /** Takes back a counted attempt on a claim still held and uncommitted (see LedgerPort). */
  uncountAttempt(claim: Claim, ownerId: string): boolean {
    return this.transaction(() => this.#s.uncountAttempt.run(claim.name, claim.claimId, ownerId).changes === 1)
  }

  /**
   * Runs `fn` with synchronous=NORMAL: its commits survive a crash of this process but not a
   * power cut until the next `flush`. In WAL mode NORMAL loses at most a suffix of commits,
   * and checkpoints still fsync, so a later FULL commit makes every earlier one durable.
   */
  lazily<T>(fn: () => T): T {
    const level = (this.db.query("PRAGMA synchronous").get() as { synchronous: number }).synchronous
    if (level <= 1) return fn()
    this.db.exec("PRAGMA synchronous = NORMAL")
    try {
      return fn()
    } finally {
      this.db.exec(`PRAGMA synchronous = ${level}`)
    }
  }

  /**
   * Makes every commit so far durable: one write (the owner's heartbeat) committed at the
   * ledger's own synchronous level fsyncs the WAL, and with it all earlier frames.
   */
  flush(ownerId: string, now: string): void {
    this.transaction(() => this.#s.heartbeat.run(now, ownerId))
  }

  /** Claims a file found in processing/ with no claim row (an orphan, e.g. after a ledger restore). */
  claimOrphan(name: string, ownerId: string, now: string): Claim | undefined {
    return this.claim(ownerId, [name], now)[0]
  }

  /** Forgets claims whose files are finished or gone, in one transaction. */
  dropClaims(claims: readonly Claim[]): void {
    if (claims.length === 0) return
    this.transaction(() => {
      for (const c of claims) this.#s.dropClaim.run(c.name, c.claimId)
    })
  }

  /** Whether `ownerId` still holds this claim (a claim taken over or ended no longer is). */
  holdsClaim(name: string, claimId: string, ownerId: string): boolean {
    return this.#s.holdsClaim.get(name, claimId, ownerId) !== null
  }

  /** Records the final name of a file in error/ when the chosen one was taken at move time. */
  renameFailure(claimId: string, file: string): void {
    this.transaction(() => this.#s.renameFailure.run(file, claimId))
  }

  /** The distinct msg_ids ever seen as duplicates, ascending. */
  *duplicateIds(): Generator<string> {
    for (const row of this.#s.duplicateIds.iterate() as IterableIterator<{ msg_id: string }>) yield row.msg_id
  }

  /** Every conflicting redelivery with the delivery that was processed, by msg_id. */
  *conflicts(): Generator<ConflictRow> {
    yield* this.#s.conflicts.iterate() as IterableIterator<ConflictRow>
  }

  /** The reason of the latest unreplayed failure recorded under `file` in error/. */
  failureReason(file: string): string | undefined {
    return this.unreplayedFailure(file)?.reason
  }

  /** The latest unreplayed failure recorded under `file` in error/. */
  unreplayedFailure(file: string): FailureRecord | undefined {
    return this.unreplayedFailures([file]).get(file)
  }

  failureReasons(): Map<string, string> {
    return operator.failureReasons(this.#s)
  }

  unreplayedFailures(files: readonly string[]): Map<string, FailureRecord> {
    return operator.unreplayedFailures(this.#s, files)
  }

  history(keys: HistoryKeys): LedgerHistory {
    return operator.history(this.db, this.#s, keys)
  }

  /** Runs `fn` under the write lock, held across its awaits (see operator.ts). */
  withReportLock<T>(fn: () => Promise<T>): Promise<T> {
    return operator.withReportLock(this, fn)
  }

  /** The statistics of `stats` (sql/stats.sql), in one read transaction. */
  stats(since: Date): LedgerStats {
    return readStats(this.db, since)
  }

  /** How many replays the ledger has logged under `file` (a bulk replay's --max-replays count). */
  replayCount(file: string): number {
    return (this.#s.replayCount.get(file) as { n: number }).n
  }

  /** The sources of the broker deliveries whose origins this ledger still keeps, sorted. */
  landedSources(): string[] {
    return (this.#s.landedSources.all() as { source: string }[]).map((r) => r.source)
  }

  /** Marks the failure record of a file replayed from error/ and logs the replay. */
  markReplayed(file: string, now: string): boolean {
    return this.transaction(() => operator.markReplayed(this.#s, file, now))
  }

  /** The result the effect of `msgId`'s processing returned; undefined when none was stored or the msg_id is unknown. */
  resultOf(msgId: string): unknown {
    return parseResult((this.#s.resultOf.get(msgId) as { result: string | null } | null)?.result)
  }

  /** A replay's ledger half around its move, under the write lock (see operator.ts). */
  recordReplay(file: string, now: string, move: () => void, maxReplays = Number.POSITIVE_INFINITY): ReplayRecord {
    return operator.recordReplay(this, this.#s, file, now, move, maxReplays)
  }

  /** A deletion's ledger half around its unlink, under the write lock (see deletions.ts). */
  recordDeletion(file: string, dir: DeletionDir, now: string, remove: () => void): DeletionRecord {
    return recordDeletion(this, file, dir, now, remove)
  }

  /** The ranges, then order-check.sql when they are few, in one read transaction. */
  orderCheck(maxRows: number): OrderCheck {
    return operator.orderCheck(this.db, maxRows)
  }

  /** The full integrity_check, then spool's consistency checks (sql/sqlite/verify.sql). */
  verify(): LedgerCheck[] {
    return verifySqlite(this.db)
  }

  close(): void {
    // A statement left unfinalized keeps the connection open until the process exits, and
    // with it the -wal file that tells the next open this ledger was not closed cleanly.
    for (const statement of Object.values(this.#s)) statement.finalize()
    this.db.close()
  }
}
