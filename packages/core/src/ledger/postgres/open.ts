// Connecting to a PostgreSQL ledger: the sessions' settings, and the probes that read what a
// database holds without creating or changing anything.
import { SQL } from "bun"
import { asLedgerError, sessionSettings } from "./errors.ts"
import { ledgerIdOf, versionOf } from "./schema.ts"

/** The busy timeout of a ledger opened without one: consume's --busy-timeout default. */
export const defaultBusyTimeoutMs = 10_000

/** A ledger's connection pool: every session waits at most `busyTimeoutMs` for a lock. */
export function connect(url: string, busyTimeoutMs: number): SQL {
  return new SQL({ url, max: 2, idleTimeout: 30, connectionTimeout: 10, connection: sessionSettings(busyTimeoutMs) })
}

/** Whether spool has set up a ledger in the database at `url` (read without creating or changing anything). */
export function isSetUp(url: string): Promise<boolean> {
  return probe(url, async (sql) => (await versionOf(sql)) > 0)
}

/**
 * The identity of the spool ledger at `url`, without creating or changing anything: its id,
 * undefined for a database spool has never migrated to version 3 (a new database, or one
 * written by an older spool).
 */
export function identify(url: string): Promise<string | undefined> {
  return probe(url, ledgerIdOf)
}

/** Runs `read` on one connection of its own, closed after. */
async function probe<T>(url: string, read: (sql: SQL) => Promise<T>): Promise<T> {
  const sql = new SQL({ url, max: 1, connectionTimeout: 10, connection: sessionSettings(defaultBusyTimeoutMs) })
  try {
    return await read(sql)
  } catch (error) {
    throw asLedgerError(error, url)
  } finally {
    await sql.close().catch(() => {})
  }
}
