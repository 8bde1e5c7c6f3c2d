import { Database, type Statement } from "bun:sqlite"
import fs from "node:fs"
import { dirname } from "node:path"
import orderCheckSql from "../sql/order-check.sql" with { type: "text" }
import init0001 from "../sql/sqlite/0001-init.sql" with { type: "text" }
import horizon0002 from "../sql/sqlite/0002-horizon.sql" with { type: "text" }
import indexes0003 from "../sql/sqlite/0003-fewer-indexes.sql" with { type: "text" }
import { SpoolError } from "./errors.ts"
import {
  damaged,
  describeAccess,
  historyOf,
  isLeftOpen,
  newLedgerRefusal,
  quickCheck,
  refuseLinks,
} from "./ledger-files.ts"
import type { LedgerPort } from "./ledger-port.ts"
import { type LedgerCheck, verifySqlite } from "./ledger-verify.ts"
import type { Owner } from "./owner.ts"
import { toStorableText } from "./storable-text.ts"

/** Schema migrations, applied in order; the index + 1 is the schema version. */
const migrations: readonly string[] = [init0001, horizon0002, indexes0003]

/** The newest schema version this spool writes. */
export const schemaVersion = migrations.length

/** A file a consumer has claimed. */
export interface Claim {
  readonly name: string
  readonly claimId: string
  readonly attempts: number
}

/** A claim as stored, with what is known of its owner. */
export interface ClaimRow extends Claim {
  readonly ownerId: string | null
  readonly state: "claimed" | "committed"
  readonly dest: "done" | "error" | null
  readonly destName: string | null
  readonly payloadHash: string | null
  readonly owner: (Owner & { readonly heartbeatAt: string }) | undefined
}

/** What the consumer decided for one claimed file, to be committed with its batch. */
export type Outcome =
  | {
      readonly kind: "accepted"
      readonly name: string
      readonly claimId: string
      readonly msgId: string
      readonly orderNo: string
      readonly seq: number
      readonly amount: string
      readonly hash: string
      /** sha256 of the message's canonical JSON: equal for the same content however it is formatted. */
      readonly contentHash: string
      /** The validated message, handed to the effect. */
      readonly message: unknown
    }
  | {
      readonly kind: "rejected"
      readonly name: string
      readonly claimId: string
      /** The name the file will have in error/ (chosen before commit so reports can join on it). */
      readonly destName: string
      readonly reason: string
      readonly detail: string
      readonly hash: string | null
    }
  | {
      /** The file left processing/ before it could be read: nothing to record but the claim's end. */
      readonly kind: "vanished"
      readonly name: string
      readonly claimId: string
    }

/**
 * What the ledger made of an outcome. `handler-rejected`: the effect threw; `beyond-horizon`:
 * an unknown msg_id at or below its order's pruned seq (see compact). Both go to error/.
 * `lost`: the claim is no longer the committing consumer's (another one took it over after
 * this one's lease ran out), so nothing was recorded and the file is not this consumer's to
 * move. `vanished`: the consumer still held the claim but the file was gone; the claim is
 * deleted. Neither moves a file.
 */
export type Verdict =
  | "processed"
  | "duplicate"
  | "conflict"
  | "rejected"
  | "handler-rejected"
  | "beyond-horizon"
  | "lost"
  | "vanished"

/** What compact removed from the ledger. */
export interface CompactSummary {
  readonly duplicates: number
  readonly failures: number
  readonly replays: number
  /** processed rows (idempotency keys) pruned past the horizon */
  readonly keys: number
}

/** A redelivery whose content differs from the processed message with the same msg_id. */
export interface ConflictRow {
  readonly msg_id: string
  readonly file: string
  readonly content_hash: string
  readonly processed_file: string
  readonly processed_content_hash: string
}

/** One row of the order check. */
export interface OrderProblem {
  readonly order_no: string
  readonly seq: number
  readonly problem: "duplicate" | "missing"
}

/** Options for opening a ledger. */
export interface LedgerOptions {
  /** Make every commit durable against power loss (synchronous=FULL). Default true. */
  readonly durable?: boolean
  /** How long to wait for another process's write lock before failing, in ms. */
  readonly busyTimeoutMs?: number
  /** Open without creating or migrating (reports, replay). */
  readonly readonly?: boolean
  /**
   * Start a new, empty ledger even beside a queue root with history (files in done/ or
   * error/, or a PostgreSQL binding), whose deduplication keys it will not have (`--new-ledger`).
   */
  readonly isNewLedgerAllowed?: boolean
}

/** An accepted outcome, as an effect sees it. */
export type AcceptedOutcome = Extract<Outcome, { kind: "accepted" }>

/**
 * A business effect that runs inside the commit transaction of a message processed for the
 * first time (never for a duplicate); its writes commit or roll back with the ledger's. If it
 * throws, its writes and the processed row are rolled back and the message goes to error/
 * with reason `handler`; the rest of the batch commits.
 */
export type Effect = (outcome: AcceptedOutcome, db: Database) => void

/** The SQLite ledger: one file next to the queue, WAL mode, short IMMEDIATE transactions. */
export class Ledger implements LedgerPort<Effect> {
  readonly backend = "sqlite" as const
  readonly db: Database
  readonly path: string
  #claimCounter = 0
  readonly #s: ReturnType<typeof prepare>

  private constructor(db: Database, path: string) {
    this.db = db
    this.path = path
    this.#s = prepare(db)
  }

  /**
   * Opens (creating and migrating as needed) the ledger at `path`, which is `ROOT/ledger.db`.
   * Refused before anything is created or changed: a symlinked ledger file, and a new ledger
   * (absent, empty, no spool tables) beside a root with history, unless `isNewLedgerAllowed`.
   * A ledger whose -wal was left behind (not closed cleanly) is checked with quick_check first.
   */
  static open(path: string, options: LedgerOptions = {}): Ledger {
    refuseLinks(path)
    const root = dirname(path)
    const isGuarded = options.isNewLedgerAllowed !== true
    const wasLeftOpen = isLeftOpen(path)
    // The history is looked at before the ledger: spool moves a file to done/ or error/ only
    // after the ledger has committed it, so files seen first and no ledger (or no schema) seen
    // after cannot be this ledger's doing, even while other consumers are starting.
    const isNew = !fs.existsSync(path)
    if (isNew && isGuarded) {
      const history = historyOf(root)
      if (history !== undefined && !fs.existsSync(path)) throw newLedgerRefusal(path, "absent", history)
    }
    if (isNew && options.readonly) throw new SpoolError("ledger", `${path} has no spool ledger yet; run consume first`)
    // Created with its final mode before SQLite opens it, so it is never world-writable, not
    // even for a moment under umask 000. EEXIST is another consumer winning the same race.
    if (isNew && !options.readonly)
      try {
        fs.closeSync(fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o640))
      } catch {}
    let db: Database
    try {
      db = new Database(path, { create: !options.readonly, readwrite: true, strict: true })
    } catch (error) {
      throw asLedgerError(error, path, `cannot open the ledger ${path}: ${describe(error)}`)
    }
    try {
      if (isNew) fs.chmodSync(path, 0o640)
      const busyTimeoutMs = Math.max(0, Math.trunc(options.busyTimeoutMs ?? 10_000))
      db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`)
      // Before the switch to WAL below, which writes the header of an empty file. A file this
      // process just created was judged by the history check above.
      if (!isNew && isGuarded && untilNotBusy(busyTimeoutMs, () => userVersion(db)) === 0) {
        const history = historyOf(root)
        if (history !== undefined && userVersion(db) === 0)
          throw newLedgerRefusal(path, fs.statSync(path).size === 0 ? "empty" : "unmigrated", history)
      }
      // Switching a new database to WAL needs its exclusive lock, and SQLite answers BUSY at
      // once (no busy handler) while another process opening it at the same moment holds it.
      untilNotBusy(busyTimeoutMs, () => db.exec("PRAGMA journal_mode = WAL"))
      // FULL: the WAL is fsynced at every commit, so a reported commit survives power loss.
      // NORMAL (the --no-fsync choice) survives a process crash but not a power cut.
      db.exec(`PRAGMA synchronous = ${options.durable === false ? "NORMAL" : "FULL"}`)
      // msg_ids arrive in random order, so every batch dirties index pages all over the file; with
      // SQLite's default 2 MiB cache each batch re-reads them. 8 MiB holds most hot index pages
      // and is a fixed bound, so memory stays flat however large the ledger grows. (16 MiB took
      // 1M random keys in about 18% less time in bench/ledger-cache.ts, and cost the consume
      // process 8 MB more memory.)
      db.exec("PRAGMA cache_size = -8192")
      // A checkpoint copies every page the WAL holds back into the database file. Every 10,000
      // pages instead of SQLite's 1,000, an index page that many batches rewrite is copied once,
      // not after every batch. Durability is the WAL fsync at COMMIT, unchanged; the WAL file
      // peaks near 40 MiB on disk and is removed when the last connection closes.
      db.exec("PRAGMA wal_autocheckpoint = 10000")
      // quick_check reads every page, too slow for every start of a large ledger (BENCHMARKS.md,
      // The ledger's integrity checks), so it runs when the last run may have ended mid-write:
      // its -wal is still there (killed, power cut), or another process has the ledger open.
      if (!options.readonly && wasLeftOpen) quickCheck(db, path)
      if (!options.readonly) migrate(db, path)
      else if (userVersion(db) === 0)
        throw new SpoolError("ledger", `${path} has no spool ledger yet; run consume first`)
    } catch (error) {
      db.close()
      throw asLedgerError(error, path)
    }
    return new Ledger(db, path)
  }

  /** Runs `fn` in a BEGIN IMMEDIATE transaction: the write lock is taken up front, so COMMIT cannot hit a busy lock. */
  transaction<T>(fn: () => T): T {
    try {
      return this.db.transaction(fn).immediate()
    } catch (error) {
      throw asLedgerError(error, this.path)
    }
  }

  registerConsumer(owner: Owner, now: string): void {
    this.transaction(() => {
      this.#s.registerConsumer.run(owner.ownerId, owner.host, owner.pid, owner.bootId, owner.startTicks, now, now)
    })
  }

  unregisterConsumer(ownerId: string): void {
    this.transaction(() => {
      this.#s.deleteCommittedClaims.run(ownerId)
      this.#s.unregisterConsumer.run(ownerId)
    })
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
    const claimed: Claim[] = []
    // Process-crash durable only (no WAL fsync): the claim rows need to be on disk only before
    // the commit that follows, and that commit's fsync (synchronous=FULL) makes every earlier
    // WAL frame durable with it. A power cut before that commit can lose these rows; the files
    // then sit in processing/ with no claim, and recovery claims and processes them as orphans,
    // which is right because nothing about them was committed. One fsync per batch saved.
    this.lazily(() =>
      this.transaction(() => {
        // A prepared statement per row: measured faster than one statement over a JSON array,
        // whose element extraction costs more than the per-call overhead it saves.
        for (const c of forget) this.#s.forgetClaim.run(c.name, c.claimId)
        this.#s.heartbeat.run(now, ownerId)
        for (const name of names) {
          const claimId = `${ownerId}.${(this.#claimCounter++).toString(36)}`
          if (this.#s.insertClaim.run(name, claimId, ownerId, now).changes === 1)
            claimed.push({ name, claimId, attempts: 1 })
        }
      }),
    )
    return claimed
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
   * Commits a batch of outcomes in one transaction: processed rows (the PRIMARY KEY decides
   * duplicates), duplicate and failure history, and each claim marked committed. Fenced: an
   * outcome whose claim `ownerId` no longer holds records nothing and is `lost`.
   */
  commit(ownerId: string, outcomes: readonly Outcome[], now: string, effect?: Effect): Verdict[] {
    const s = this.#s
    return this.transaction(() => {
      const hasHorizon = s.hasHorizon.get() !== null
      const verdicts = outcomes.map((o): Verdict => {
        // The claim is marked first, and only if it is still this owner's: that is the fence.
        if (o.kind === "vanished")
          return s.releaseClaim.run(o.name, o.claimId, ownerId).changes === 1 ? "vanished" : "lost"
        if (o.kind === "rejected") {
          if (s.commitClaim.run("error", o.destName, o.hash, o.name, o.claimId, ownerId).changes === 0) return "lost"
          this.#recordFailure(o.destName, o.name, o.reason, o.detail, o.hash, o.claimId, now)
          return "rejected"
        }
        if (s.commitClaimDone.run(o.name, o.claimId, ownerId).changes === 0) return "lost"
        if (hasHorizon && s.processedHash.get(o.msgId) === null) {
          const h = s.horizonOf.get(o.orderNo) as { max_seq: number } | null
          if (h !== null && o.seq <= h.max_seq) {
            const detail = `msg_id unknown, but seq ${o.seq} <= ${h.max_seq}, the highest seq of order ${o.orderNo} pruned by compact: older than the deduplication horizon`
            this.#recordFailure(o.name, o.name, "beyond-horizon", detail, o.hash, o.claimId, now)
            s.commitClaim.run("error", o.name, o.hash, o.name, o.claimId, ownerId)
            return "beyond-horizon"
          }
        }
        if (effect !== undefined) this.db.exec("SAVEPOINT spool_effect")
        if (
          s.insertProcessed.run(o.msgId, o.orderNo, o.seq, o.amount, o.name, o.hash, o.contentHash, o.claimId, now)
            .changes === 1
        ) {
          if (effect !== undefined) {
            try {
              effect(o, this.db)
              this.db.exec("RELEASE spool_effect")
            } catch (error) {
              this.db.exec("ROLLBACK TO spool_effect")
              this.db.exec("RELEASE spool_effect")
              const detail = error instanceof Error ? error.message : String(error)
              this.#recordFailure(o.name, o.name, "handler", detail, o.hash, o.claimId, now)
              s.commitClaim.run("error", o.name, o.hash, o.name, o.claimId, ownerId)
              return "handler-rejected"
            }
          }
          return "processed"
        }
        if (effect !== undefined) this.db.exec("RELEASE spool_effect")
        const first = s.processedHash.get(o.msgId) as { content_hash: string } | null
        const isConflict = first !== null && first.content_hash !== o.contentHash
        s.insertDuplicate.run(o.msgId, o.name, o.hash, o.contentHash, isConflict ? 1 : 0, o.claimId, now)
        return isConflict ? "conflict" : "duplicate"
      })
      return verdicts
    })
  }

  /** A failures row. Its detail is free text (a parser's message, a handler's error): made storable. */
  #recordFailure(
    file: string,
    original: string,
    reason: string,
    detail: string,
    hash: string | null,
    claimId: string,
    now: string,
  ): void {
    this.#s.insertFailure.run(file, original, reason, toStorableText(detail), hash, claimId, now)
  }

  /**
   * Retention: forgets history (duplicates, replayed failures, replays) older than `historyCutoff`
   * and, when `keyCutoff` is given, processed rows (idempotency keys) older than it, keeping
   * each order's highest pruned seq in `horizon`. One transaction; returns what was removed.
   * With `dryRun` the same statements run and are rolled back: the counts are exactly what a
   * real run removes.
   */
  compact(
    historyCutoff: string,
    keyCutoff: string | undefined,
    now: string,
    options: { dryRun?: boolean } = {},
  ): CompactSummary {
    if (options.dryRun) {
      let summary: CompactSummary | undefined
      try {
        this.transaction(() => {
          summary = this.compact(historyCutoff, keyCutoff, now)
          throw rollback
        })
      } catch (error) {
        if (error !== rollback) throw error
      }
      return summary as CompactSummary
    }
    return this.transaction(() => {
      const duplicates = this.db.run("DELETE FROM duplicates WHERE seen_at < ?", [historyCutoff]).changes
      const failures = this.db.run("DELETE FROM failures WHERE replayed_at IS NOT NULL AND replayed_at < ?", [
        historyCutoff,
      ]).changes
      const replays = this.db.run("DELETE FROM replays WHERE replayed_at < ?", [historyCutoff]).changes
      let keys = 0
      if (keyCutoff !== undefined) {
        this.db.run(
          `INSERT INTO horizon (order_no, max_seq, pruned, pruned_at)
           SELECT order_no, MAX(seq), COUNT(*), ? FROM processed WHERE processed_at < ? GROUP BY order_no
           ON CONFLICT (order_no) DO UPDATE SET max_seq = MAX(max_seq, excluded.max_seq),
             pruned = pruned + excluded.pruned, pruned_at = excluded.pruned_at`,
          [now, keyCutoff],
        )
        keys = this.db.run("DELETE FROM processed WHERE processed_at < ?", [keyCutoff]).changes
      }
      return { duplicates, failures, replays, keys }
    })
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
    return (this.#s.failureReason.get(file) as { reason: string } | null)?.reason
  }

  /** How many replays the ledger has logged under `file` (a bulk replay's --max-replays count). */
  replayCount(file: string): number {
    return (this.#s.replayCount.get(file) as { n: number }).n
  }

  /** Marks the failure record of a file replayed from error/ and logs the replay. */
  markReplayed(file: string, now: string): boolean {
    return this.transaction(() => {
      const row = this.#s.latestFailure.get(file) as { id: number } | null
      this.#s.insertReplay.run(file, row?.id ?? null, now)
      if (row === null) return false
      this.#s.markReplayed.run(now, row.id)
      return true
    })
  }

  /** Runs order-check.sql as checked in. */
  orderProblems(): OrderProblem[] {
    return this.db.query(orderCheckSql).all() as OrderProblem[]
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

function prepare(db: Database) {
  const q = (sql: string): Statement => db.prepare(sql)
  return {
    registerConsumer: q(
      "INSERT OR REPLACE INTO consumers (owner_id, host, pid, boot_id, start_ticks, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    unregisterConsumer: q("DELETE FROM consumers WHERE owner_id = ?"),
    listConsumers: q("SELECT owner_id, host, pid, boot_id, start_ticks FROM consumers"),
    forgetConsumer: q(
      "DELETE FROM consumers WHERE owner_id = ? AND NOT EXISTS (SELECT 1 FROM claims WHERE claims.owner_id = consumers.owner_id)",
    ),
    heartbeat: q("UPDATE consumers SET heartbeat_at = ? WHERE owner_id = ?"),
    deleteCommittedClaims: q("DELETE FROM claims WHERE owner_id = ? AND state = 'committed'"),
    forgetClaim: q("DELETE FROM claims WHERE name = ? AND claim_id = ? AND state = 'committed'"),
    insertClaim: q(
      `INSERT INTO claims (name, claim_id, owner_id, attempts, state, claimed_at)
       VALUES (?, ?, ?, 1, 'claimed', ?) ON CONFLICT (name) DO NOTHING`,
    ),
    releaseClaim: q("DELETE FROM claims WHERE name = ? AND claim_id = ? AND owner_id = ?"),
    commitClaim: q(
      "UPDATE claims SET state = 'committed', dest = ?, dest_name = ?, payload_hash = ? WHERE name = ? AND claim_id = ? AND owner_id = ?",
    ),
    commitClaimDone: q(
      "UPDATE claims SET state = 'committed', dest = 'done' WHERE name = ? AND claim_id = ? AND owner_id = ?",
    ),
    insertProcessed: q(
      "INSERT INTO processed (msg_id, order_no, seq, amount, file, payload_hash, content_hash, claim_id, processed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (msg_id) DO NOTHING",
    ),
    processedHash: q("SELECT content_hash FROM processed WHERE msg_id = ?"),
    hasHorizon: q("SELECT 1 FROM horizon LIMIT 1"),
    horizonOf: q("SELECT max_seq FROM horizon WHERE order_no = ?"),
    insertDuplicate: q(
      "INSERT INTO duplicates (msg_id, file, payload_hash, content_hash, is_conflict, claim_id, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    insertFailure: q(
      "INSERT INTO failures (file, original, reason, detail, payload_hash, claim_id, failed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    listClaims: q(
      `SELECT c.name, c.claim_id, c.owner_id, c.attempts, c.state, c.dest, c.dest_name, c.payload_hash,
              o.host, o.pid, o.boot_id, o.start_ticks, o.heartbeat_at
       FROM claims c LEFT JOIN consumers o ON o.owner_id = c.owner_id ORDER BY c.rowid`,
    ),
    adoptClaim: q(
      `UPDATE claims SET owner_id = ?, attempts = attempts + ? WHERE name = ? AND claim_id = ? AND owner_id IS ?
       RETURNING attempts, state, dest, dest_name, payload_hash`,
    ),
    dropClaim: q("DELETE FROM claims WHERE name = ? AND claim_id = ?"),
    uncountAttempt: q(
      "UPDATE claims SET attempts = attempts - 1 WHERE name = ? AND claim_id = ? AND owner_id = ? AND state = 'claimed' AND attempts > 1",
    ),
    renameFailure: q("UPDATE failures SET file = ? WHERE claim_id = ?"),
    holdsClaim: q("SELECT 1 FROM claims WHERE name = ? AND claim_id = ? AND owner_id = ?"),
    duplicateIds: q("SELECT DISTINCT msg_id FROM duplicates ORDER BY msg_id"),
    conflicts: q(
      `SELECT d.msg_id, d.file, d.content_hash, p.file AS processed_file, p.content_hash AS processed_content_hash
       FROM duplicates d JOIN processed p ON p.msg_id = d.msg_id
       WHERE d.is_conflict = 1 ORDER BY d.msg_id, d.id`,
    ),
    failureReason: q("SELECT reason FROM failures WHERE file = ? AND replayed_at IS NULL ORDER BY id DESC LIMIT 1"),
    latestFailure: q("SELECT id FROM failures WHERE file = ? AND replayed_at IS NULL ORDER BY id DESC LIMIT 1"),
    markReplayed: q("UPDATE failures SET replayed_at = ? WHERE id = ?"),
    insertReplay: q("INSERT INTO replays (file, failure_id, replayed_at) VALUES (?, ?, ?)"),
    replayCount: q("SELECT count(*) AS n FROM replays WHERE file = ?"),
  }
}

/** A claims row joined with its owner, as both backends select it. */
export interface RawClaimRow {
  name: string
  claim_id: string
  owner_id: string | null
  attempts: number
  state: "claimed" | "committed"
  dest: "done" | "error" | null
  dest_name: string | null
  payload_hash: string | null
  host: string | null
  pid: number | null
  boot_id: string | null
  start_ticks: string | null
  heartbeat_at: string | null
}

/** The columns a takeover returns: the claim's state as the adopting transaction found it. */
export type AdoptedRow = Pick<RawClaimRow, "attempts" | "state" | "dest" | "dest_name" | "payload_hash">

/** A taken-over claim's current columns, as the engine sees them. */
export function adopted(r: AdoptedRow): Pick<ClaimRow, "attempts" | "state" | "dest" | "destName" | "payloadHash"> {
  return { attempts: r.attempts, state: r.state, dest: r.dest, destName: r.dest_name, payloadHash: r.payload_hash }
}

/** A selected consumers row. */
export interface RawOwner {
  owner_id: string
  host: string
  pid: number
  boot_id: string
  start_ticks: string
}

/** A consumers row as the engine sees it. */
export function toOwner(r: RawOwner): Owner {
  return { ownerId: r.owner_id, host: r.host, pid: r.pid, bootId: r.boot_id, startTicks: r.start_ticks }
}

/** A selected claims row as the engine sees it. */
export function toClaimRow(r: RawClaimRow): ClaimRow {
  return {
    name: r.name,
    claimId: r.claim_id,
    ownerId: r.owner_id,
    attempts: r.attempts,
    state: r.state,
    dest: r.dest,
    destName: r.dest_name,
    payloadHash: r.payload_hash,
    // The joined consumers row, when there is one: its columns are NOT NULL, so a host means
    // the whole row is there.
    owner:
      r.owner_id !== null && r.host !== null
        ? { ...toOwner(r as RawClaimRow & RawOwner), heartbeatAt: r.heartbeat_at ?? "" }
        : undefined,
  }
}

function userVersion(db: Database): number {
  return (db.query("PRAGMA user_version").get() as { user_version: number }).user_version
}

function migrate(db: Database, path: string): void {
  if (userVersion(db) >= migrations.length) {
    if (userVersion(db) > migrations.length)
      throw new SpoolError("ledger", `${path} was written by a newer spool (schema ${userVersion(db)}); upgrade spool`)
    return
  }
  // IMMEDIATE, and the version read again inside: two consumers starting at once must not
  // both run the same migration.
  db.transaction(() => {
    for (let v = userVersion(db); v < migrations.length; v++) {
      db.exec(migrations[v] as string)
      db.exec(`PRAGMA user_version = ${v + 1}`)
    }
  }).immediate()
}

/** Runs `fn`, again every few milliseconds while SQLite reports the database busy, up to `timeoutMs`. */
function untilNotBusy<T>(timeoutMs: number, fn: () => T): T {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      return fn()
    } catch (error) {
      const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
      if (!code.startsWith("SQLITE_BUSY") || Date.now() >= deadline) throw error
      Bun.sleepSync(5)
    }
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/**
 * Turns SQLite's errors into ones that say what to do; `fallback` is the message for an error
 * of SQLite's with no more specific one.
 */
function asLedgerError(error: unknown, path: string, fallback?: string): unknown {
  if (error instanceof SpoolError) return error
  const message = describe(error)
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  if (code.startsWith("SQLITE_BUSY") || /database is locked/i.test(message))
    return new SpoolError(
      "ledger",
      `the ledger ${path} stayed locked by another process for longer than the busy timeout; find the process holding it (fuser ${path}) or raise --busy-timeout`,
      { cause: error },
    )
  // Read-only, or not openable at all: most often one file of the ledger's (the root, the
  // ledger, its -wal or -shm) that this user may not write. Name that file when there is one.
  const isAccessError =
    code.startsWith("SQLITE_READONLY") || /readonly/i.test(message) || code.startsWith("SQLITE_CANTOPEN")
  const access = isAccessError ? describeAccess(path) : undefined
  if (access !== undefined) return new SpoolError("ledger", access, { cause: error })
  if (code.startsWith("SQLITE_READONLY") || /readonly/i.test(message))
    return new SpoolError(
      "ledger",
      `the ledger ${path} is read-only; give the consumer write access to it and to its directory`,
      { cause: error },
    )
  if (code.startsWith("SQLITE_FULL") || /disk is full|database or disk is full/i.test(message))
    return new SpoolError("io", `the disk holding ${path} is full; free space and run again`, { cause: error })
  // A full disk often surfaces as an I/O error instead (SQLITE_IOERR_SHMSIZE: the -shm file
  // could not grow), so say both things to look at.
  if (code.startsWith("SQLITE_IOERR"))
    return new SpoolError(
      "io",
      `the ledger ${path} could not be written (${code}: ${message}); check free space on its disk (df) and the system log for disk errors, then run again`,
      { cause: error },
    )
  if (code.startsWith("SQLITE_CORRUPT") || code.startsWith("SQLITE_NOTADB"))
    return damaged(path, `${code}: ${message}`, { cause: error })
  // In WAL mode SQLite must create ledger.db-wal and -shm beside the ledger, even to read it.
  if (code.startsWith("SQLITE_CANTOPEN"))
    return new SpoolError(
      "ledger",
      `cannot open the ledger ${path} (${message}); give this user write access to it and to its directory, where SQLite keeps its -wal and -shm files`,
      { cause: error },
    )
  if (fallback !== undefined) return new SpoolError("ledger", fallback, { cause: error })
  if (code.startsWith("SQLITE_")) return new SpoolError("ledger", `ledger ${path}: ${message}`, { cause: error })
  return error
}

const rollback = new Error("roll back the dry run")
