import type { Database } from "bun:sqlite"
import checksSql from "../../../sql/sqlite/verify.sql" with { type: "text" }
import { type LedgerCheck, messageOf, type ProblemRow, spoolTallies, Tally } from "../verify.ts"

/** The checks of a SQLite ledger: `PRAGMA integrity_check`, then sql/sqlite/verify.sql. */
export function verifySqlite(db: Database): LedgerCheck[] {
  const integrity = new Tally("integrity", "PRAGMA integrity_check: every page, and every index entry against its row")
  try {
    for (const row of db.query("PRAGMA integrity_check").iterate() as IterableIterator<{ integrity_check: string }>)
      if (row.integrity_check !== "ok") integrity.add(row.integrity_check)
  } catch (error) {
    if (!isSqliteCorrupt(error)) throw error
    integrity.add(messageOf(error))
  }
  const tallies = spoolTallies()
  try {
    for (const row of db.query(checksSql).iterate() as IterableIterator<ProblemRow>)
      tallies.get(row.check_name)?.add(row.problem)
  } catch (error) {
    if (!isSqliteCorrupt(error)) throw error
    for (const t of tallies.values()) t.add(`the tables cannot be read: ${messageOf(error)}`)
  }
  return [integrity.result(), ...[...tallies.values()].map((t) => t.result())]
}

function isSqliteCorrupt(error: unknown): boolean {
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  return code.startsWith("SQLITE_CORRUPT") || code.startsWith("SQLITE_NOTADB")
}
