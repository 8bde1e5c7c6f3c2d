// SQLite's errors turned into ones that say what to do, and the retry of a busy database.
import { SpoolError } from "../../errors.ts"
import { damaged, describeAccess } from "./files.ts"

/** Runs `fn`, again every few milliseconds while SQLite reports the database busy, up to `timeoutMs`. */
export function untilNotBusy<T>(timeoutMs: number, fn: () => T): T {
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

export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/**
 * Turns SQLite's errors into ones that say what to do; `fallback` is the message for an error
 * of SQLite's with no more specific one.
 */
export function asLedgerError(error: unknown, path: string, fallback?: string): unknown {
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
