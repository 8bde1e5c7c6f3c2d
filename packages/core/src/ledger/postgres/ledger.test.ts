// The PostgreSQL adapter's own behaviour: its migrations under concurrent opens, its connection
// errors. What every ledger does is the contract's (ledger/contract.test.ts), run on this adapter too.
import { afterAll, describe, expect, it } from "bun:test"
import { pgUnavailable, tempDatabase } from "@spool/test-support"
import { PostgresLedger } from "./ledger.ts"
import { spoolTables, versionOf } from "./schema.ts"

const skip = await pgUnavailable()
if (skip) console.warn(skip)
const pg = skip ? describe.skip : describe

pg("PostgresLedger", () => {
  const open: PostgresLedger[] = []
  afterAll(async () => {
    for (const l of open) await l.close().catch(() => {})
  })

  it("creates the schema once even when several consumers open a new ledger at the same moment", async () => {
    await using db = await tempDatabase()
    const ledgers = await Promise.all(Array.from({ length: 4 }, () => PostgresLedger.open(db.url, "root-a")))
    for (const l of ledgers) expect(await versionOf(l.sql)).toBe(8)
    const sql = (ledgers[0] as PostgresLedger).sql
    const rows = await sql`SELECT version FROM spool_schema ORDER BY version`
    expect(rows.map((r: { version: number }) => r.version)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
    for (const l of ledgers) await l.close()
  })

  it("names every table its migrations create, so verify checks the indexes of each", async () => {
    await using db = await tempDatabase()
    const ledger = await PostgresLedger.open(db.url, "root-a")
    open.push(ledger)
    const rows = await ledger.sql`SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1`
    expect(spoolTables().sort()).toEqual(rows.map((r: { tablename: string }) => r.tablename))
  })

  it("says clearly when the server cannot be reached", async () => {
    await expect(PostgresLedger.open("postgres://postgres@127.0.0.1:1/none", "r")).rejects.toThrow(
      /cannot reach the PostgreSQL ledger at postgres:\/\/postgres@127.0.0.1:1\/none/,
    )
  })
})
