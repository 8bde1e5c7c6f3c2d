import type { SQL } from "bun"
import checksSql from "../../../sql/postgres/verify.sql" with { type: "text" }
import { type LedgerCheck, messageOf, type ProblemRow, spoolTallies, Tally } from "../verify.ts"
import { pgArray } from "./arrays.ts"
import { pgCode } from "./errors.ts"
import { spoolTables } from "./schema.ts"

/**
 * The checks of a PostgreSQL ledger: amcheck's `bt_index_check` with `heapallindexed` on every
 * index of spool's tables when the extension is installed, then sql/postgres/verify.sql.
 */
export async function verifyPostgres(sql: SQL): Promise<LedgerCheck[]> {
  const integrity = await checkIndexes(sql)
  const tallies = spoolTallies()
  const results = (await sql.begin("READ ONLY", (tx) => tx.unsafe(checksSql).simple())) as unknown[]
  const rows = (Array.isArray(results.at(-1)) ? results.at(-1) : results) as ProblemRow[]
  for (const row of rows) tallies.get(row.check_name)?.add(row.problem)
  return [integrity, ...[...tallies.values()].map((t) => t.result())]
}

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
       AND t.relname = ANY ($1::text[])
     ORDER BY 1`,
    [pgArray(spoolTables())],
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

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}
