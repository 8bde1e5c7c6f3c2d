// The PostgreSQL adapter's own behaviour: its migrations under concurrent opens, its connection
// errors. What every ledger does is the contract's (ledger/contract.test.ts), run on this adapter too.
import { afterAll, describe, expect, it } from "bun:test"
import { pgUnavailable, tempDatabase } from "@spool/test-support"
import type { Outcome } from "../model.ts"
import { PostgresLedger } from "./ledger.ts"

const skip = await pgUnavailable()
if (skip) console.warn(skip)
const pg = skip ? describe.skip : describe

const now = () => new Date().toISOString()
const accepted = (
  name: string,
  claimId: string,
  msgId: string,
  extra: Partial<Record<string, unknown>> = {},
): Outcome =>
  ({
    kind: "accepted",
    name,
    claimId,
    msgId,
    orderNo: "O-1",
    seq: 1,
    amount: "1.10",
    hash: `h-${name}`,
    contentHash: `c-${msgId}`,
    message: {},
    ...extra,
  }) as Outcome

pg("PostgresLedger", () => {
  const open: PostgresLedger[] = []
  afterAll(async () => {
    for (const l of open) await l.close().catch(() => {})
  })

  it("creates the schema once even when several consumers open a new ledger at the same moment", async () => {
    await using db = await tempDatabase()
    const ledgers = await Promise.all(Array.from({ length: 4 }, () => PostgresLedger.open(db.url, "root-a")))
    for (const l of ledgers) expect(await l.version()).toBe(5)
    const sql = (ledgers[0] as PostgresLedger).sql
    const rows = await sql`SELECT version FROM spool_schema ORDER BY version`
    expect(rows.map((r: { version: number }) => r.version)).toEqual([1, 2, 3, 4, 5])
    for (const l of ledgers) await l.close()
  })

  it("forgets at the next claim only the committed claims it is given of this owner, never another's", async () => {
    // The SQLite ledger forgets a committed claim by name and claim id, whoever holds it now.
    await using db = await tempDatabase()
    const l = await PostgresLedger.open(db.url, "root-a")
    open.push(l)
    const [a] = await l.claim("o", ["a.json"], now())
    const [d] = await l.claim("other", ["d.json"], now())
    if (!a || !d) throw new Error("no claim")
    await l.commit("o", [accepted("a.json", a.claimId, "m-a")], now())
    await l.commit("other", [accepted("d.json", d.claimId, "m-d")], now())
    expect((await l.claim("o", ["a.json"], now(), [a, d])).map((x) => x.name)).toEqual(["a.json"])
    expect((await l.listClaims()).map((r) => [r.name, r.ownerId, r.state])).toEqual([
      ["d.json", "other", "committed"],
      ["a.json", "o", "claimed"],
    ])
  })

  it("says clearly when the server cannot be reached", async () => {
    await expect(PostgresLedger.open("postgres://postgres@127.0.0.1:1/none", "r")).rejects.toThrow(
      /cannot reach the PostgreSQL ledger at postgres:\/\/postgres@127.0.0.1:1\/none/,
    )
  })
})
