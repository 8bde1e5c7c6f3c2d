import { SQL, type TransactionSQL } from "bun"
import orderCheckSql from "../sql/order-check.sql" with { type: "text" }
import init0001 from "../sql/postgres/0001-init.sql" with { type: "text" }
import horizon0002 from "../sql/postgres/0002-horizon.sql" with { type: "text" }
import ledgerId0003 from "../sql/postgres/0003-ledger-id.sql" with { type: "text" }
import { SpoolError } from "./errors.ts"
import {
  type AcceptedOutcome,
  type AdoptedRow,
  adopted,
  type Claim,
  type ClaimRow,
  type CompactSummary,
  type ConflictRow,
  type OrderProblem,
  type Outcome,
  type RawClaimRow,
  type RawOwner,
  toClaimRow,
  toOwner,
  type Verdict,
} from "./ledger.ts"
import type { LedgerPort } from "./ledger-port.ts"
import { type LedgerCheck, verifyPostgres } from "./ledger-verify.ts"
import type { Owner } from "./owner.ts"
import { toStorableText } from "./storable-text.ts"

/**
 * Schema migrations, one per version: 1 and 2 in step with the SQLite ones (same numbers, same
 * tables); 3 gives the ledger its identity (SQLite's 3 drops indexes PostgreSQL never had).
 */
const migrations: readonly string[] = [init0001, horizon0002, ledgerId0003]

/** A business effect on the PostgreSQL ledger: runs inside the commit transaction. */
export type PostgresEffect = (outcome: AcceptedOutcome, tx: SQL) => void | Promise<void>

// Serialises migrations between consumers that start at once (any constant works: it only
// has to be the same for every spool process).
const MIGRATION_LOCK = 7_270_001

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
      if (options.migrate !== false) await ledger.#migrate()
      else if ((await ledger.version()) === 0)
        throw new SpoolError("ledger", `${redact(url)} has no spool ledger yet; run consume first`)
    } catch (error) {
      await sql.close().catch(() => {})
      throw asLedgerError(error, url)
    }
    return ledger
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
  async version(): Promise<number> {
    const [row] = await this.sql`SELECT to_regclass('spool_schema') IS NOT NULL AS present`
    if (!row?.present) return 0
    const [v] = await this.sql`SELECT COALESCE(MAX(version), 0)::int AS version FROM spool_schema`
    return (v?.version as number) ?? 0
  }

  async #migrate(): Promise<void> {
    await this.sql.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`
      await tx`CREATE TABLE IF NOT EXISTS spool_schema (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`
      const [v] = await tx`SELECT COALESCE(MAX(version), 0)::int AS version FROM spool_schema`
      const current = (v?.version as number) ?? 0
      if (current > migrations.length)
        throw new SpoolError(
          "ledger",
          `the PostgreSQL ledger was written by a newer spool (schema ${current}); upgrade spool`,
        )
      for (let n = current; n < migrations.length; n++) {
        await tx.unsafe(migrations[n] as string)
        await tx`INSERT INTO spool_schema (version, applied_at) VALUES (${n + 1}, ${new Date().toISOString()})`
      }
    })
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
      await tx`DELETE FROM claims WHERE owner_id = ${ownerId} AND state = 'committed'`
      await tx`DELETE FROM consumers WHERE owner_id = ${ownerId}`
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
      await tx`UPDATE consumers SET heartbeat_at = ${now} WHERE owner_id = ${ownerId}`
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

  /**
   * Commits a batch in one transaction, set-wise: failures, then processed rows inserted in
   * msg_id order (a fixed lock order across hosts) with ON CONFLICT DO NOTHING, then duplicates
   * for the rest, then every claim marked committed. Within a batch the first delivery of a
   * msg_id (in batch order) wins, as in a sequential run.
   */
  async commit(ownerId: string, all: readonly Outcome[], now: string, effect?: PostgresEffect): Promise<Verdict[]> {
    const root = this.rootId
    return this.transaction(async (tx) => {
      const verdicts = new Map<string, Verdict>()
      // The fence, first: each claim is marked committed only if this owner still holds it
      // (its row lock then keeps a takeover out until this transaction ends). An outcome whose
      // claim another consumer took over, after this one's lease ran out, records nothing.
      // The rows are found through the primary key (name = ANY), as in claim: left to join the
      // list, the planner misjudges the owner filter and rescans claims, dead rows and all,
      // for every file (4x slower); an owner_id = condition would bitmap-scan the
      // (owner_id, state) index full of dead entries instead.
      const marks = all.flatMap((o) =>
        o.kind === "vanished"
          ? []
          : [
              {
                name: o.name,
                claim_id: o.claimId,
                dest: o.kind === "rejected" ? "error" : "done",
                dest_name: o.kind === "rejected" ? o.destName : null,
                hash: o.hash,
              },
            ],
      )
      const committed =
        marks.length === 0
          ? []
          : await tx`
              UPDATE claims c SET state = 'committed', dest = t.dest, dest_name = t.dest_name, payload_hash = t.hash
              FROM jsonb_to_recordset(${marks}::jsonb) AS t(name text, claim_id text, dest text, dest_name text, hash text)
              WHERE c.root_id = ${root} AND c.name = ANY (ARRAY(SELECT jsonb_array_elements(${marks}::jsonb) ->> 'name'))
                AND c.name = t.name AND c.claim_id = t.claim_id AND c.owner_id IS NOT DISTINCT FROM ${ownerId}
              RETURNING c.claim_id`
      const gone = all.flatMap((o) => (o.kind === "vanished" ? [{ name: o.name, claim_id: o.claimId }] : []))
      const ended =
        gone.length === 0
          ? []
          : await tx`
              DELETE FROM claims c USING jsonb_to_recordset(${gone}::jsonb) AS t(name text, claim_id text)
              WHERE c.root_id = ${root} AND c.name = ANY (ARRAY(SELECT jsonb_array_elements(${gone}::jsonb) ->> 'name'))
                AND c.name = t.name AND c.claim_id = t.claim_id AND c.owner_id IS NOT DISTINCT FROM ${ownerId}
              RETURNING c.claim_id`
      const owned = new Set([...committed, ...ended].map((r) => (r as { claim_id: string }).claim_id))
      for (const o of all)
        if (!owned.has(o.claimId)) verdicts.set(o.claimId, "lost")
        else if (o.kind === "vanished") verdicts.set(o.claimId, "vanished")
      const outcomes = all.filter((o) => o.kind !== "vanished" && owned.has(o.claimId))
      const accepted = outcomes.flatMap((o, ord) =>
        o.kind === "accepted"
          ? [
              {
                ord,
                name: o.name,
                claim_id: o.claimId,
                msg_id: o.msgId,
                order_no: o.orderNo,
                seq: o.seq,
                amount: o.amount,
                hash: o.hash,
                content_hash: o.contentHash,
              },
            ]
          : [],
      )
      const failures: {
        file: string
        original: string
        reason: string
        detail: string
        hash: string | null
        claim_id: string
      }[] = []
      for (const o of outcomes)
        if (o.kind === "rejected") {
          failures.push({
            file: o.destName,
            original: o.name,
            reason: o.reason,
            detail: o.detail,
            hash: o.hash,
            claim_id: o.claimId,
          })
          verdicts.set(o.claimId, "rejected")
        }

      // Beyond the deduplication horizon: unknown msg_id at or below its order's pruned seq.
      if (accepted.length > 0) {
        const [h] = await tx`SELECT EXISTS (SELECT 1 FROM horizon) AS any`
        if (h?.any) {
          const beyond = await tx`
            SELECT t.claim_id, t.name, t.hash, t.seq, t.order_no, h.max_seq
            FROM jsonb_to_recordset(${accepted}::jsonb) AS t(claim_id text, name text, hash text, msg_id text, order_no text, seq bigint)
            JOIN horizon h ON h.order_no = t.order_no
            WHERE t.seq <= h.max_seq AND NOT EXISTS (SELECT 1 FROM processed p WHERE p.msg_id = t.msg_id)`
          for (const b of beyond as {
            claim_id: string
            name: string
            hash: string
            seq: string
            order_no: string
            max_seq: string
          }[]) {
            verdicts.set(b.claim_id, "beyond-horizon")
            failures.push({
              file: b.name,
              original: b.name,
              reason: "beyond-horizon",
              detail: `msg_id unknown, but seq ${b.seq} <= ${b.max_seq}, the highest seq of order ${b.order_no} pruned by compact: older than the deduplication horizon`,
              hash: b.hash,
              claim_id: b.claim_id,
            })
          }
        }
      }
      const candidates = accepted.filter((a) => !verdicts.has(a.claim_id))
      if (candidates.length > 0) {
        const inserted = await tx`
          INSERT INTO processed (msg_id, order_no, seq, amount, file, root_id, payload_hash, content_hash, claim_id, processed_at)
          SELECT t.msg_id, t.order_no, t.seq, t.amount, t.name, ${root}, t.hash, t.content_hash, t.claim_id, ${now}
          FROM jsonb_to_recordset(${candidates}::jsonb)
            AS t(ord bigint, name text, claim_id text, msg_id text, order_no text, seq bigint, amount text, hash text, content_hash text)
          ORDER BY t.msg_id COLLATE "C", t.ord
          ON CONFLICT (msg_id) DO NOTHING
          RETURNING claim_id`
        for (const r of inserted as { claim_id: string }[]) verdicts.set(r.claim_id, "processed")
        if (effect !== undefined) {
          for (const o of outcomes) {
            if (o.kind !== "accepted" || verdicts.get(o.claimId) !== "processed") continue
            try {
              await tx.savepoint(async (sp) => {
                await effect(o, sp)
              })
            } catch (error) {
              await tx`DELETE FROM processed WHERE claim_id = ${o.claimId}`
              verdicts.set(o.claimId, "handler-rejected")
              failures.push({
                file: o.name,
                original: o.name,
                reason: "handler",
                detail: error instanceof Error ? error.message : String(error),
                hash: o.hash,
                claim_id: o.claimId,
              })
            }
          }
        }
        const dups = candidates.filter((a) => !verdicts.has(a.claim_id))
        if (dups.length > 0) {
          const recorded = await tx`
            INSERT INTO duplicates (msg_id, file, root_id, payload_hash, content_hash, is_conflict, claim_id, seen_at)
            SELECT t.msg_id, t.name, ${root}, t.hash, t.content_hash,
                   CASE WHEN p.content_hash IS DISTINCT FROM t.content_hash THEN 1 ELSE 0 END, t.claim_id, ${now}
            FROM jsonb_to_recordset(${dups}::jsonb)
              AS t(ord bigint, name text, claim_id text, msg_id text, hash text, content_hash text)
            LEFT JOIN processed p ON p.msg_id = t.msg_id
            ORDER BY t.ord
            RETURNING claim_id, is_conflict`
          for (const r of recorded as { claim_id: string; is_conflict: number }[])
            verdicts.set(r.claim_id, r.is_conflict ? "conflict" : "duplicate")
        }
      }
      // A detail is free text (a parser's message, an effect's error): made storable, or one
      // U+0000 in it would abort the whole batch's commit.
      for (const f of failures) f.detail = toStorableText(f.detail)
      if (failures.length > 0)
        await tx`
          INSERT INTO failures (root_id, file, original, reason, detail, payload_hash, claim_id, failed_at)
          SELECT ${root}, t.file, t.original, t.reason, t.detail, t.hash, t.claim_id, ${now}
          FROM jsonb_to_recordset(${failures}::jsonb)
            AS t(file text, original text, reason text, detail text, hash text, claim_id text)`
      // Accepted messages the ledger refused after all (the effect threw, or beyond the
      // horizon) go to error/ under their own name: their claims say so.
      const refused = outcomes.flatMap((o) => {
        const v = verdicts.get(o.claimId)
        return o.kind === "accepted" && (v === "handler-rejected" || v === "beyond-horizon")
          ? [{ name: o.name, claim_id: o.claimId }]
          : []
      })
      if (refused.length > 0)
        await tx`
          UPDATE claims c SET dest = 'error', dest_name = t.name
          FROM jsonb_to_recordset(${refused}::jsonb) AS t(name text, claim_id text)
          WHERE c.root_id = ${root} AND c.name = t.name AND c.claim_id = t.claim_id`
      return all.map((o) => verdicts.get(o.claimId) ?? "processed")
    })
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
    await this.sql`UPDATE consumers SET heartbeat_at = ${now} WHERE owner_id = ${ownerId}`
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
    await this.sql`UPDATE failures SET file = ${file} WHERE claim_id = ${claimId}`
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
  async replayCount(file: string, tx: SQL = this.sql): Promise<number> {
    const [row] = await tx`SELECT COUNT(*)::int AS n FROM replays WHERE root_id = ${this.rootId} AND file = ${file}`
    return row.n as number
  }

  /** Marks the failure record of a file replayed from error/ and logs the replay. */
  async markReplayed(file: string, now: string, tx: SQL = this.sql): Promise<boolean> {
    const [row] = await tx`
      SELECT id FROM failures WHERE root_id = ${this.rootId} AND file = ${file} AND replayed_at IS NULL
      ORDER BY id DESC LIMIT 1 FOR UPDATE`
    await tx`INSERT INTO replays (root_id, file, failure_id, replayed_at) VALUES (${this.rootId}, ${file}, ${row?.id ?? null}, ${now})`
    if (!row) return false
    await tx`UPDATE failures SET replayed_at = ${now} WHERE id = ${row.id}`
    return true
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
    if (!options.dryRun) return this.transaction((tx) => prune(tx, historyCutoff, keyCutoff, now))
    return this.transaction(async (tx) => {
      let summary: CompactSummary | undefined
      try {
        await tx.savepoint(async (sp) => {
          summary = await prune(sp, historyCutoff, keyCutoff, now)
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

/** compact's statements, in the caller's transaction (or savepoint). */
async function prune(
  tx: SQL,
  historyCutoff: string,
  keyCutoff: string | undefined,
  now: string,
): Promise<CompactSummary> {
  const duplicates = (await tx`DELETE FROM duplicates WHERE seen_at < ${historyCutoff}`).count
  const failures = (await tx`DELETE FROM failures WHERE replayed_at IS NOT NULL AND replayed_at < ${historyCutoff}`)
    .count
  const replays = (await tx`DELETE FROM replays WHERE replayed_at < ${historyCutoff}`).count
  let keys = 0
  if (keyCutoff !== undefined) {
    await tx`
      INSERT INTO horizon (order_no, max_seq, pruned, pruned_at)
      SELECT order_no, MAX(seq), COUNT(*), ${now} FROM processed WHERE processed_at < ${keyCutoff} GROUP BY order_no
      ON CONFLICT (order_no) DO UPDATE SET max_seq = GREATEST(horizon.max_seq, excluded.max_seq),
        pruned = horizon.pruned + excluded.pruned, pruned_at = excluded.pruned_at`
    keys = (await tx`DELETE FROM processed WHERE processed_at < ${keyCutoff}`).count
  }
  return { duplicates, failures, replays, keys }
}

function pgCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined
  const e = error as { errno?: unknown; code?: unknown }
  return typeof e.errno === "string" ? e.errno : undefined
}

/** The id in spool_ledger, undefined where the table is not there yet. */
async function ledgerIdOf(sql: SQL): Promise<string | undefined> {
  const [row] = await sql`SELECT to_regclass('spool_ledger') IS NOT NULL AS present`
  if (!row?.present) return undefined
  const [id] = await sql`SELECT ledger_id FROM spool_ledger ORDER BY created_at LIMIT 1`
  return (id?.ledger_id as string | undefined) ?? undefined
}

/** The URL without its password, for messages. */
export function redact(url: string): string {
  try {
    const u = new URL(url)
    if (u.password) u.password = "***"
    return u.toString()
  } catch {
    return "the PostgreSQL ledger"
  }
}

function asLedgerError(error: unknown, url: string): unknown {
  if (error instanceof SpoolError) return error
  const message = error instanceof Error ? error.message : String(error)
  const code = (error as { code?: string })?.code ?? ""
  if (/ECONNREFUSED|ERR_POSTGRES_CONNECTION|connection|ENOTFOUND|timeout/i.test(`${code} ${message}`))
    return new SpoolError(
      "ledger",
      `cannot reach the PostgreSQL ledger at ${redact(url)}: ${message}; check that the server runs and the URL (--ledger or SPOOL_LEDGER_URL) is right`,
      { cause: error },
    )
  return new SpoolError("ledger", `PostgreSQL ledger ${redact(url)}: ${message}`, { cause: error })
}
