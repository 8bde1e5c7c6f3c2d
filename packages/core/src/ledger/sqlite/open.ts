// Opening the SQLite ledger file: what is refused before anything is created, and the
// connection's settings (WAL, durability, cache, checkpoints), each with why.
import { Database } from "bun:sqlite"
import fs from "node:fs"
import { dirname } from "node:path"
import { SpoolError } from "../../errors.ts"
import { asLedgerError, describe, untilNotBusy } from "./errors.ts"
import { historyOf, isLeftOpen, newLedgerRefusal, quickCheck, refuseLinks } from "./files.ts"
import { migrate, userVersion } from "./schema.ts"

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

/**
 * Opens (creating and migrating as needed) the ledger database at `path`, which is
 * `ROOT/ledger.db`. Refused before anything is created or changed: a symlinked ledger file, and
 * a new ledger (absent, empty, no spool tables) beside a root with history, unless
 * `isNewLedgerAllowed`. A ledger whose -wal was left behind (not closed cleanly) is checked with
 * quick_check first.
 */
export function openDatabase(path: string, options: LedgerOptions = {}): Database {
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
    // A reader opens the file read-only, so that it changes nothing there: as the last connection
    // to close, a read-write one would checkpoint the WAL into ledger.db and delete -wal and -shm,
    // the very evidence of an unfinished run that makes the next consume check the ledger first.
    db = new Database(
      path,
      options.readonly ? { readonly: true, strict: true } : { create: true, readwrite: true, strict: true },
    )
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
    if (!options.readonly) untilNotBusy(busyTimeoutMs, () => db.exec("PRAGMA journal_mode = WAL"))
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
    // quick_check reads every page, too slow for every start of a large ledger (measured in
    // bench/results/ledger-checks.md), so it runs when the last run may have ended mid-write:
    // its -wal is still there (killed, power cut), or another process has the ledger open.
    if (!options.readonly && wasLeftOpen) quickCheck(db, path)
    if (!options.readonly) migrate(db, path)
    else if (userVersion(db) === 0) throw new SpoolError("ledger", `${path} has no spool ledger yet; run consume first`)
  } catch (error) {
    db.close()
    throw asLedgerError(error, path)
  }
  return db
}
