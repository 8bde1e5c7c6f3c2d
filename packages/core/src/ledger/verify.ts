// `verify`: the integrity of a ledger's storage, as far as each backend can check it, then
// spool's own consistency rules, which read the tables without the indexes they check.
import type { Database } from "bun:sqlite"
import type { SQL } from "bun"
import postgresChecksSql from "../../sql/postgres/verify.sql" with { type: "text" }
import sqliteChecksSql from "../../sql/sqlite/verify.sql" with { type: "text" }
import { pgCode } from "./postgres/errors.ts"

/** The checks `verify` runs, in order. */
export const ledgerCheckNames = ["integrity", "duplicate-msg-id", "duplicate-claim", "claim-without-consumer"] as const
export type LedgerCheckName = (typeof ledgerCheckNames)[number]

/** One of spool's checks of a ledger, and what it found. */
export interface LedgerCheck {
  readonly name: LedgerCheckName
  /** What it looks at, in one line. */
  readonly description: string
  readonly status: "ok" | "failed" | "skipped"
  /** How many problems it found; `problems` holds the first `maxProblems`. */
  readonly found: number
  readonly problems: readonly string[]
  /** Why it was skipped. */
  readonly note?: string
}

/** How many problems of one check are kept for the report (all are counted). */
export const maxProblems = 100

const spoolChecks: Record<Exclude<LedgerCheckName, "integrity">, string> = {
  "duplicate-msg-id": "no msg_id has two processed rows (a table scan, not the PRIMARY KEY's index)",
  "duplicate-claim": "no file has two claims rows (a table scan, not the PRIMARY KEY's index)",
  "claim-without-consumer": "every claim's owner has a consumers row",
}

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
    for (const row of db.query(sqliteChecksSql).iterate() as IterableIterator<ProblemRow>)
      tallies.get(row.check_name)?.add(row.problem)
  } catch (error) {
    if (!isSqliteCorrupt(error)) throw error
    for (const t of tallies.values()) t.add(`the tables cannot be read: ${messageOf(error)}`)
  }
  return [integrity.result(), ...[...tallies.values()].map((t) => t.result())]
}

/**
 * The checks of a PostgreSQL ledger: amcheck's `bt_index_check` with `heapallindexed` on every
 * index of spool's tables when the extension is installed, then sql/postgres/verify.sql.
 */
export async function verifyPostgres(sql: SQL): Promise<LedgerCheck[]> {
  const integrity = await checkIndexes(sql)
  const tallies = spoolTallies()
  const results = (await sql.begin("READ ONLY", (tx) => tx.unsafe(postgresChecksSql).simple())) as unknown[]
  const rows = (Array.isArray(results.at(-1)) ? results.at(-1) : results) as ProblemRow[]
  for (const row of rows) tallies.get(row.check_name)?.add(row.problem)
  return [integrity, ...[...tallies.values()].map((t) => t.result())]
}

const spoolTables = ["processed", "duplicates", "failures", "claims", "consumers", "replays", "horizon", "spool_schema"]

async function checkIndexes(sql: SQL): Promise<LedgerCheck> {
  const integrity = new Tally(
    "integrity",
    "amcheck bt_index_check(heapallindexed): every index of spool's tables, and every row against it",
  )
  const [ext] =
    (await sql`SELECT extnamespace::regnamespace::text AS schema FROM pg_extension WHERE extname = 'amcheck'`) as {
      schema: string
    }[]
  if (ext === undefined)
    return integrity.skip(
      "the amcheck extension is not installed in this database; CREATE EXTENSION amcheck (as a superuser) lets verify check every index against its table",
    )
  const indexes = (await sql.unsafe(
    `SELECT c.oid::regclass::text AS name FROM pg_index i
     JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid JOIN pg_am am ON am.oid = c.relam
     WHERE am.amname = 'btree' AND t.relnamespace = current_schema()::regnamespace
       AND t.relname IN (${spoolTables.map((t) => `'${t}'`).join(", ")})
     ORDER BY 1`,
  )) as { name: string }[]
  const check = `${quoteIdent(ext.schema)}.bt_index_check`
  for (const { name } of indexes) {
    try {
      await sql.unsafe(`SELECT ${check}($1::regclass, true)`, [name])
    } catch (error) {
      const code = pgCode(error)
      // 42501: amcheck is installed, but this role may not run it.
      if (code === "42501") return integrity.skip(`this role may not run amcheck: ${messageOf(error)}`)
      // XX001 data_corrupted, XX002 index_corrupted.
      if (code !== "XX001" && code !== "XX002") throw error
      integrity.add(`${name}: ${messageOf(error)}`)
    }
  }
  return integrity.result()
}

interface ProblemRow {
  readonly check_name: string
  readonly problem: string
}

/** Counts a check's problems and keeps the first few. */
class Tally {
  #found = 0
  readonly #problems: string[] = []
  constructor(
    readonly name: LedgerCheckName,
    readonly description: string,
  ) {}
  add(problem: string): void {
    this.#found++
    if (this.#problems.length < maxProblems) this.#problems.push(problem)
  }
  result(): LedgerCheck {
    return {
      name: this.name,
      description: this.description,
      status: this.#found === 0 ? "ok" : "failed",
      found: this.#found,
      problems: this.#problems,
    }
  }
  skip(note: string): LedgerCheck {
    return { name: this.name, description: this.description, status: "skipped", found: 0, problems: [], note }
  }
}

function spoolTallies(): Map<string, Tally> {
  return new Map(Object.entries(spoolChecks).map(([name, d]) => [name, new Tally(name as LedgerCheckName, d)]))
}

function isSqliteCorrupt(error: unknown): boolean {
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  return code.startsWith("SQLITE_CORRUPT") || code.startsWith("SQLITE_NOTADB")
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
