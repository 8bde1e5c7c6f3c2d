// The SQLite ledger's schema (its migrations, run in one IMMEDIATE transaction) and the
// prepared statements SqliteLedger runs: SQL a human can read beside the .sql files it loads.
import type { Database, Statement } from "bun:sqlite"
import init0001 from "../../../sql/sqlite/0001-init.sql" with { type: "text" }
import horizon0002 from "../../../sql/sqlite/0002-horizon.sql" with { type: "text" }
import indexes0003 from "../../../sql/sqlite/0003-fewer-indexes.sql" with { type: "text" }
import results0004 from "../../../sql/sqlite/0004-results.sql" with { type: "text" }
import deferrals0005 from "../../../sql/sqlite/0005-deferrals.sql" with { type: "text" }
import origins0006 from "../../../sql/sqlite/0006-origins.sql" with { type: "text" }
import deletions0007 from "../../../sql/sqlite/0007-deletions.sql" with { type: "text" }
import { SpoolError } from "../../errors.ts"
import { forSqlite, statements } from "../statements.ts"

/** Schema migrations, applied in order; the index + 1 is the schema version. */
const migrations: readonly string[] = [
  init0001,
  horizon0002,
  indexes0003,
  results0004,
  deferrals0005,
  origins0006,
  deletions0007,
]

/** The newest schema version this spool writes. */
export const schemaVersion = migrations.length

/** The statements of a landed broker delivery (see ../landings.ts). */
const landingStatements = {
  /** The attempts the source counted, on a claim row just inserted with 1. */
  setAttempts: "UPDATE claims SET attempts = $1 WHERE name = $2 AND claim_id = $3",
  insertOrigin: `INSERT INTO origins (claim_id, name, payload_hash, delivery_id, source, address, headers, message_id, landed_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
  /** A deferred delivery's origin, carried to the claim that picks it up (new claim id first). */
  copyOrigin: `INSERT INTO origins (claim_id, name, payload_hash, delivery_id, source, address, headers, message_id, landed_at)
    SELECT $1, name, payload_hash, delivery_id, source, address, headers, message_id, landed_at
    FROM origins WHERE claim_id = $2`,
  /**
   * Whether a claim that landed these bytes under this name has an outcome: its processed,
   * duplicates or failures row, or a deferral it holds. Found through the claim ids, which every outcome table indexes.
   */
  committedLanding: `SELECT 1 AS found FROM origins o WHERE o.name = $1 AND o.payload_hash = $2 AND (
      EXISTS (SELECT 1 FROM processed p WHERE p.claim_id = o.claim_id)
      OR EXISTS (SELECT 1 FROM duplicates d WHERE d.claim_id = o.claim_id)
      OR EXISTS (SELECT 1 FROM failures f WHERE f.claim_id = o.claim_id)
      OR EXISTS (SELECT 1 FROM deferrals r WHERE r.claim_id = o.claim_id))
    LIMIT 1`,
  /** Whether a claim landed a broker delivery (or picked one up from deferred/): its origins row. */
  landedClaim: "SELECT 1 AS found FROM origins WHERE claim_id = $1",
  /** The origins row of the latest unreplayed failure under a file in error/, if it has one. */
  failureOrigin: `SELECT o.claim_id, o.source, o.address, o.headers, o.message_id
    FROM (SELECT claim_id FROM failures WHERE file = $1 AND replayed_at IS NULL AND deleted_at IS NULL ORDER BY id DESC LIMIT 1) f
    JOIN origins o ON o.claim_id = f.claim_id`,
} as const

/** The prepared statements of a ledger, by name. */
export type Statements = ReturnType<typeof prepare>

/** The statements of a ledger connection, prepared once. */
export function prepare(db: Database) {
  const q = (sql: string): Statement => db.prepare(sql)
  return {
    registerConsumer: q(
      "INSERT OR REPLACE INTO consumers (owner_id, host, pid, boot_id, start_ticks, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    unregisterConsumer: q(forSqlite(statements.deleteConsumer)),
    listConsumers: q("SELECT owner_id, host, pid, boot_id, start_ticks FROM consumers"),
    forgetConsumer: q(
      "DELETE FROM consumers WHERE owner_id = ? AND NOT EXISTS (SELECT 1 FROM claims WHERE claims.owner_id = consumers.owner_id)",
    ),
    heartbeat: q(forSqlite(statements.heartbeat)),
    deleteCommittedClaims: q(forSqlite(statements.deleteCommittedClaims)),
    forgetClaim: q("DELETE FROM claims WHERE name = ? AND claim_id = ? AND owner_id = ? AND state = 'committed'"),
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
    storeResult: q(forSqlite(statements.storeResult)),
    resultOf: q(forSqlite(statements.resultOf)),
    hasHorizon: q("SELECT 1 FROM horizon LIMIT 1"),
    horizonOf: q("SELECT max_seq FROM horizon WHERE order_no = ?"),
    insertDuplicate: q(
      "INSERT INTO duplicates (msg_id, file, payload_hash, content_hash, is_conflict, claim_id, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    insertFailure: q(
      "INSERT INTO failures (file, original, reason, detail, payload_hash, claim_id, failed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    hasDeferrals: q("SELECT 1 FROM deferrals LIMIT 1"),
    deferralOf: q(
      "SELECT file, msg_id, attempts, first_deferred_at, next_attempt_at, last_error, claim_id, payload_hash FROM deferrals WHERE claim_id = ?",
    ),
    deferralAt: q("SELECT 1 FROM deferrals WHERE file = ?"),
    deferralByFile: q(
      "SELECT file, msg_id, attempts, first_deferred_at, next_attempt_at, last_error, claim_id, payload_hash FROM deferrals WHERE file = ?",
    ),
    closeDeferral: q("DELETE FROM deferrals WHERE claim_id = ?"),
    upsertDeferral: q(
      `INSERT INTO deferrals (file, msg_id, attempts, first_deferred_at, next_attempt_at, last_error, payload_hash, claim_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (file) DO UPDATE SET msg_id = excluded.msg_id, attempts = excluded.attempts,
         first_deferred_at = excluded.first_deferred_at, next_attempt_at = excluded.next_attempt_at,
         last_error = excluded.last_error, payload_hash = excluded.payload_hash, claim_id = excluded.claim_id`,
    ),
    dueDeferrals: q(
      `SELECT file, msg_id, attempts, first_deferred_at, next_attempt_at, last_error, claim_id, payload_hash FROM deferrals
       WHERE next_attempt_at <= ? ORDER BY next_attempt_at, file LIMIT ?`,
    ),
    nextDeferral: q("SELECT min(next_attempt_at) AS at FROM deferrals"),
    setAttempts: q(forSqlite(landingStatements.setAttempts)),
    insertOrigin: q(forSqlite(landingStatements.insertOrigin)),
    copyOrigin: q(forSqlite(landingStatements.copyOrigin)),
    committedLanding: q(forSqlite(landingStatements.committedLanding)),
    landedClaim: q(forSqlite(landingStatements.landedClaim)),
    failureOrigin: q(forSqlite(landingStatements.failureOrigin)),
    pickUpDeferral: q("UPDATE deferrals SET claim_id = ? WHERE file = ? AND claim_id = ? AND next_attempt_at <= ?"),
    dropDeferral: q("DELETE FROM deferrals WHERE file = ? AND claim_id = ?"),
    renameDeferral: q("UPDATE deferrals SET file = ? WHERE claim_id = ?"),
    countDeferrals: q(
      "SELECT count(*) AS deferred, count(*) FILTER (WHERE next_attempt_at <= ?) AS due FROM deferrals",
    ),
    listClaims: q(
      `SELECT c.name, c.claim_id, c.owner_id, c.attempts, c.state, c.dest, c.dest_name, c.payload_hash,
              o.host, o.pid, o.boot_id, o.start_ticks, o.heartbeat_at
       FROM claims c LEFT JOIN consumers o ON o.owner_id = c.owner_id ORDER BY c.rowid`,
    ),
    // What tells the file a committed claim committed from a later one of its name: on the claim
    // row for error/ and deferred/, the payload hash on its processed or duplicates row for
    // done/ (see LedgerPort.adoptClaims).
    adoptClaim: q(
      `UPDATE claims SET owner_id = ?, attempts = attempts + ? WHERE name = ? AND claim_id = ? AND owner_id IS ?
       RETURNING attempts, state, dest, dest_name, COALESCE(payload_hash,
         (SELECT p.payload_hash FROM processed p WHERE p.claim_id = claims.claim_id),
         (SELECT d.payload_hash FROM duplicates d WHERE d.claim_id = claims.claim_id)) AS payload_hash`,
    ),
    dropClaim: q("DELETE FROM claims WHERE name = ? AND claim_id = ?"),
    uncountAttempt: q(
      "UPDATE claims SET attempts = attempts - 1 WHERE name = ? AND claim_id = ? AND owner_id = ? AND state = 'claimed' AND attempts > 1",
    ),
    renameFailure: q(forSqlite(statements.renameFailure)),
    holdsClaim: q("SELECT 1 FROM claims WHERE name = ? AND claim_id = ? AND owner_id = ?"),
    duplicateIds: q("SELECT DISTINCT msg_id FROM duplicates ORDER BY msg_id"),
    conflicts: q(
      `SELECT d.msg_id, d.file, d.content_hash, p.file AS processed_file, p.content_hash AS processed_content_hash
       FROM duplicates d JOIN processed p ON p.msg_id = d.msg_id
       WHERE d.is_conflict = 1 ORDER BY d.msg_id, d.id`,
    ),
    failureReasons: q("SELECT file, reason FROM failures WHERE replayed_at IS NULL AND deleted_at IS NULL ORDER BY id"),
    latestFailure: q(
      "SELECT id FROM failures WHERE file = ? AND replayed_at IS NULL AND deleted_at IS NULL ORDER BY id DESC LIMIT 1",
    ),
    markReplayed: q("UPDATE failures SET replayed_at = ? WHERE id = ?"),
    insertReplay: q("INSERT INTO replays (file, failure_id, replayed_at) VALUES (?, ?, ?)"),
    replayCount: q("SELECT count(*) AS n FROM replays WHERE file = ?"),
    landedSources: q("SELECT DISTINCT source FROM origins ORDER BY source"),
    unreplayedFailures: q(
      `SELECT file, reason, payload_hash AS payloadHash, failed_at AS failedAt FROM failures
       WHERE file IN (SELECT value FROM json_each(?1)) AND replayed_at IS NULL AND deleted_at IS NULL ORDER BY id`,
    ),
    // show's lookups: one JSON array of keys per parameter (msg_ids, files, payload hashes, those each uses, in that order).
    historyProcessed: q(
      `SELECT msg_id, file, processed_at, claim_id, payload_hash, content_hash, result FROM processed
       WHERE msg_id IN (SELECT value FROM json_each(?1)) OR file IN (SELECT value FROM json_each(?2))
          OR payload_hash IN (SELECT value FROM json_each(?3))
       ORDER BY processed_at, rowid`,
    ),
    historyDuplicates: q(
      `SELECT msg_id, file, seen_at, is_conflict, claim_id, payload_hash, content_hash FROM duplicates
       WHERE msg_id IN (SELECT value FROM json_each(?1)) OR file IN (SELECT value FROM json_each(?2))
          OR payload_hash IN (SELECT value FROM json_each(?3))
       ORDER BY id`,
    ),
    historyFailures: q(
      `SELECT id, file, original, reason, detail, payload_hash, claim_id, failed_at, replayed_at, deleted_at FROM failures
       WHERE file IN (SELECT value FROM json_each(?1)) OR original IN (SELECT value FROM json_each(?1))
          OR payload_hash IN (SELECT value FROM json_each(?2))
       ORDER BY id`,
    ),
    historyReplays: q(
      `SELECT file, failure_id, replayed_at FROM replays
       WHERE file IN (SELECT value FROM json_each(?1))
          OR failure_id IN (SELECT id FROM failures WHERE file IN (SELECT value FROM json_each(?1))
                              OR original IN (SELECT value FROM json_each(?1))
                              OR payload_hash IN (SELECT value FROM json_each(?2)))
       ORDER BY id`,
    ),
    historyClaims: q(
      `SELECT c.name, c.claim_id, c.owner_id, c.attempts, c.state, c.dest, c.dest_name, c.payload_hash, c.claimed_at,
              o.host, o.pid, o.boot_id, o.start_ticks, o.heartbeat_at
       FROM claims c LEFT JOIN consumers o ON o.owner_id = c.owner_id
       WHERE c.name IN (SELECT value FROM json_each(?1)) ORDER BY c.rowid`,
    ),
  }
}

/** The schema version the ledger file holds (0: none yet). */
export function userVersion(db: Database): number {
  return (db.query("PRAGMA user_version").get() as { user_version: number }).user_version
}

/** Applies the missing migrations. */
export function migrate(db: Database, path: string): void {
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
