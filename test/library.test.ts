// The library API end to end, on both ledgers: the balances app (createConsumer on SQLite,
// createPostgresConsumer on PostgreSQL) as a real process, and the consume command after it.
// The PostgreSQL half is skipped, with the reason printed, when no server answers.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { createPostgresConsumer } from "@spool/core"
import { type BackendQueue, ledgerBackends, list, run } from "@spool/test-support"

const apps = join(import.meta.dir, "apps")

function payments() {
  const files: Record<string, object> = {}
  const expected = new Map<string, number>()
  for (let i = 1; i <= 40; i++) {
    const order = `O-${i % 5}`
    const cents = i * 101
    files[`p-${String(i).padStart(3, "0")}.json`] = {
      msg_id: `pay-${i}`,
      order_no: order,
      seq: Math.ceil(i / 5),
      amount: cents / 100,
      currency: i % 2 ? "EUR" : "USD",
    }
    expected.set(order, (expected.get(order) ?? 0) + cents)
  }
  // Redeliveries must not be applied twice; a bad currency and a refund must not be applied at all.
  files["p-dup-1.json"] = files["p-001.json"] as object
  files["p-dup-2.json"] = files["p-017.json"] as object
  files["x-gbp.json"] = { msg_id: "pay-gbp", order_no: "O-1", seq: 99, amount: 5, currency: "GBP" }
  files["x-refund.json"] = { msg_id: "pay-refund", order_no: "O-2", seq: 98, amount: -5, currency: "EUR" }
  return { files, expected }
}

/** The balances app of each backend: createConsumer on SQLite, createPostgresConsumer on PostgreSQL. */
const appOf = { SQLite: "balances.ts", PostgreSQL: "balances-postgres.ts" } as const

/** Runs the balances app on the queue; it finds its ledger as the commands do, in SPOOL_LEDGER_URL. */
const app = (q: BackendQueue, env: Record<string, string> = {}) =>
  run(["bun", join(apps, appOf[q.backend]), q.root], { env: { ...q.env, ...env } })

async function balances(s: BackendQueue): Promise<Map<string, number>> {
  const rows = (await s.rows("SELECT order_no, CAST(cents AS INTEGER) AS cents FROM balances")) as {
    order_no: string
    cents: number
  }[]
  return new Map(rows.map((r) => [r.order_no, r.cents]))
}

const failures = (s: BackendQueue) => s.rows("SELECT file, reason FROM failures ORDER BY file")

for (const backend of await ledgerBackends())
  (backend.skip ? describe.skip : describe.concurrent)(
    `the library API on ${backend.name} (a typed message and a handler in the commit transaction)`,
    () => {
      it("applies each payment exactly once, in the same transaction as its processed row", async () => {
        const { files, expected } = payments()
        await using s = await backend.queue({ seed: files })
        const r = await app(s)
        expect(r.stderr).toBe("")
        expect(r.exitCode).toBe(0)
        expect(JSON.parse(r.stdout)).toMatchObject({ processed: 40, duplicates: 2, rejected: 2 })
        expect(await balances(s)).toEqual(expected)
        expect(await failures(s)).toEqual([
          { file: "x-gbp.json", reason: "invalid-field" },
          { file: "x-refund.json", reason: "handler" },
        ])
        expect(list(join(s.root, "error"))).toEqual(["x-gbp.json", "x-refund.json"])
        expect(list(join(s.root, "done"))).toHaveLength(42)
        expect(list(join(s.root, "processing"))).toEqual([])
      })

      it("sends a message whose handler throws to error/ as handler, and commits the rest of its batch", async () => {
        const { files } = payments()
        // One batch (the app's batchSize is 7): the refund among three payments.
        const batch = {
          "p-001.json": files["p-001.json"] as object,
          "p-002.json": files["p-002.json"] as object,
          "x-refund.json": files["x-refund.json"] as object,
          "p-003.json": files["p-003.json"] as object,
        }
        await using s = await backend.queue({ seed: batch })
        const r = await app(s)
        expect(r.stderr).toBe("")
        expect(r.exitCode).toBe(0)
        expect(JSON.parse(r.stdout)).toMatchObject({ processed: 3, duplicates: 0, rejected: 1 })
        expect(await failures(s)).toEqual([{ file: "x-refund.json", reason: "handler" }])
        expect(await s.rows("SELECT msg_id FROM processed ORDER BY msg_id")).toEqual([
          { msg_id: "pay-1" },
          { msg_id: "pay-2" },
          { msg_id: "pay-3" },
        ])
        expect(await balances(s)).toEqual(
          new Map([
            ["O-1", 101],
            ["O-2", 202],
            ["O-3", 303],
          ]),
        )
        expect(list(join(s.root, "error"))).toEqual(["x-refund.json"])
        expect(list(join(s.root, "done"))).toEqual(["p-001.json", "p-002.json", "p-003.json"])
      })

      it("records into its ledger: a redelivery consumed by the consume command is a duplicate, applied once", async () => {
        const { files, expected } = payments()
        await using s = await backend.queue({ seed: files })
        expect((await app(s)).exitCode).toBe(0)
        fs.copyFileSync(join(s.root, "done", "p-005.json"), join(s.root, "inbox", "p-005-again.json"))
        const r = await s.command("consume")
        expect(r.stderr).toContain("processed=0 duplicates=1")
        expect(r.exitCode).toBe(0)
        expect(list(join(s.root, "done"))).toContain("p-005-again.json")
        expect(await balances(s)).toEqual(expected)
      })

      it("never applies an effect twice when the process dies between commit and move", async () => {
        const { files, expected } = payments()
        await using s = await backend.queue({ seed: files })
        for (let kill = 1; kill <= 3; kill++) {
          const r = await app(s, { SPOOL_FAULT: "after-commit" })
          expect(r.exitCode).not.toBe(0) // killed by SIGKILL right after a commit
        }
        const r = await app(s)
        expect(r.exitCode).toBe(0)
        expect(await balances(s)).toEqual(expected)
        expect(list(join(s.root, "processing"))).toEqual([])
        expect(list(join(s.root, "inbox"))).toEqual([])
        // Only the two real redeliveries, no recovery counted as one.
        expect(await s.rows("SELECT CAST(COUNT(*) AS INTEGER) AS n FROM duplicates")).toEqual([{ n: 2 }])
      })
    },
  )

for (const backend of await ledgerBackends())
  if (backend.name === "PostgreSQL")
    (backend.skip ? describe.skip : describe)("createPostgresConsumer started several times at once", () => {
      it("runs each one's setup in turn, so all may CREATE TABLE IF NOT EXISTS the same table", async () => {
        await using q = await backend.queue({ seed: {} })
        // Four consumers opening together. Each setup waits until all four have begun (or 300
        // ms have passed) before its CREATE: run at once they would all find the table missing
        // and collide in pg_type; taken in turn, each after a short wait finds it or makes it.
        let begun = 0
        let allBegun = () => {}
        const together = new Promise<void>((resolve) => {
          allBegun = resolve
        })
        const opened = await Promise.allSettled(
          Array.from({ length: 4 }, () =>
            createPostgresConsumer({
              root: q.root,
              ledger: q.url as string,
              async setup(sql) {
                if (++begun === 4) allBegun()
                await Promise.race([together, Bun.sleep(300)])
                await sql`CREATE TABLE IF NOT EXISTS side_effects (msg_id TEXT PRIMARY KEY)`
              },
            }),
          ),
        )
        for (const o of opened) if (o.status === "fulfilled") await o.value.close()
        expect(opened.map((o) => (o.status === "rejected" ? String(o.reason) : "opened"))).toEqual(
          Array(4).fill("opened"),
        )
        expect(await q.tables()).toContain("side_effects")
      })
    })
