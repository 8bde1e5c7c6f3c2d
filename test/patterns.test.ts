// The idempotency patterns of test/apps/patterns.ts, on both ledgers: each command's effect and
// its stored result, and a redelivery that applies nothing again.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import { join } from "node:path"
import { pgUnavailable, run, tempDatabase, tempQueue } from "@spool/test-support"
import { SQL } from "bun"

const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)
const app = join(import.meta.dir, "apps", "patterns.ts")

const command = (msgId: string, seq: number, fields: object) => ({
  msg_id: msgId,
  order_no: "C-1",
  seq,
  amount: 0,
  ...fields,
})

const seed = {
  "1.json": command("set-1", 1, { op: "set-email", target: "cust-1", email: "a@example.com" }),
  "2.json": command("set-2", 2, { op: "set-email", target: "cust-1", email: "b@example.com" }),
  "3.json": { ...command("wd-1", 3, { op: "withdraw", target: "acct-1", expected_version: 1 }), amount: 25.5 },
  "4.json": { ...command("wd-2", 4, { op: "withdraw", target: "acct-1", expected_version: 1 }), amount: 10 },
  "5.json": command("drop-1", 5, { op: "drop-cart", target: "cart-1" }),
  "6.json": command("drop-2", 6, { op: "drop-cart", target: "cart-1" }),
}

type Rows = (query: string) => Promise<unknown[]>

const backends = [
  {
    name: "SQLite",
    skip: undefined,
    async open(root: string) {
      const rows: Rows = async (query) => {
        const db = new Database(join(root, "ledger.db"), { readonly: true })
        try {
          return db.query(query).all()
        } finally {
          db.close()
        }
      }
      return { args: [root], rows, async [Symbol.asyncDispose]() {} }
    },
  },
  {
    name: "PostgreSQL",
    skip: pgSkip,
    async open(root: string) {
      const db = await tempDatabase()
      const rows: Rows = async (query) => {
        const sql = new SQL({ url: db.url, max: 1 })
        try {
          return [...(await sql.unsafe(query))]
        } finally {
          await sql.close()
        }
      }
      return { args: [root, db.url], rows, [Symbol.asyncDispose]: db[Symbol.asyncDispose] }
    },
  },
] as const

for (const backend of backends)
  (backend.skip ? describe.skip : describe)(`idempotency patterns on ${backend.name}`, () => {
    it("upserts, checks versions and deletes if there, storing what each did; a redelivery does nothing", async () => {
      // Two drains, so that each pattern's second command comes after its first (a drain takes
      // inbox/ in directory order).
      await using q = await tempQueue({
        seed: { "1.json": seed["1.json"], "3.json": seed["3.json"], "5.json": seed["5.json"] },
      })
      await using b = await backend.open(q.root)
      for (const second of [{}, { "2.json": seed["2.json"], "4.json": seed["4.json"], "6.json": seed["6.json"] }]) {
        for (const [name, content] of Object.entries(second)) q.put(name, content)
        const r = await run(["bun", app, ...b.args], { env: { SPOOL_LEDGER_URL: "" } })
        expect(r.stderr).toBe("")
        expect(r.exitCode).toBe(0)
        expect(JSON.parse(r.stdout)).toMatchObject({ processed: 3, rejected: 0 })
      }
      expect(await b.rows("SELECT id, email FROM customers")).toEqual([{ id: "cust-1", email: "b@example.com" }])
      expect(await b.rows("SELECT id, CAST(cents AS INTEGER) AS cents, version FROM accounts")).toEqual([
        { id: "acct-1", cents: 7450, version: 2 },
      ])
      expect(await b.rows("SELECT id FROM carts")).toEqual([])
      const results = Object.fromEntries(
        ((await b.rows("SELECT msg_id, result FROM processed")) as { msg_id: string; result: string }[]).map((row) => [
          row.msg_id,
          JSON.parse(row.result),
        ]),
      )
      expect(results).toEqual({
        "set-1": { op: "set-email", email: "a@example.com" },
        "set-2": { op: "set-email", email: "b@example.com" },
        "wd-1": { op: "withdraw", applied: true, version: 2 },
        // The stale version: recorded as what happened, the message processed, nothing changed.
        "wd-2": { op: "withdraw", applied: false, stale: 1, current: 2 },
        "drop-1": { op: "drop-cart", deleted: 1 },
        "drop-2": { op: "drop-cart", deleted: 0 },
      })
      // Redeliveries of every command: duplicates, and no table changes.
      for (const [name, content] of Object.entries(seed)) q.put(`again-${name}`, content)
      const again = await run(["bun", app, ...b.args], { env: { SPOOL_LEDGER_URL: "" } })
      expect(JSON.parse(again.stdout)).toMatchObject({ processed: 0, duplicates: 6 })
      expect(await b.rows("SELECT id, CAST(cents AS INTEGER) AS cents, version FROM accounts")).toEqual([
        { id: "acct-1", cents: 7450, version: 2 },
      ])
      expect(await b.rows("SELECT id, email FROM customers")).toEqual([{ id: "cust-1", email: "b@example.com" }])
    })
  })
