import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import { join } from "node:path"
import { list, run, tempQueue } from "@spool/test-support"

const app = join(import.meta.dir, "apps/balances.ts")

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

function balances(root: string): Map<string, number> {
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    const rows = db.query("SELECT order_no, cents FROM balances").all() as { order_no: string; cents: number }[]
    return new Map(rows.map((r) => [r.order_no, r.cents]))
  } finally {
    db.close()
  }
}

function failures(root: string) {
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    return db.query("SELECT file, reason FROM failures ORDER BY file").all()
  } finally {
    db.close()
  }
}

describe("the library API (createConsumer with a typed message and a handler)", () => {
  it("applies each payment exactly once, in the same transaction as its processed row", async () => {
    const { files, expected } = payments()
    await using q = await tempQueue({ seed: files })
    const r = await run(["bun", app, q.root])
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    expect(JSON.parse(r.stdout)).toMatchObject({ processed: 40, duplicates: 2, rejected: 2 })
    expect(balances(q.root)).toEqual(expected)
    expect(failures(q.root)).toEqual([
      { file: "x-gbp.json", reason: "invalid-field" },
      { file: "x-refund.json", reason: "handler" },
    ])
    expect(list(join(q.root, "error"))).toEqual(["x-gbp.json", "x-refund.json"])
    expect(list(join(q.root, "done"))).toHaveLength(42)
    expect(list(join(q.root, "processing"))).toEqual([])
  })

  it("never applies an effect twice when the process dies between commit and move", async () => {
    const { files, expected } = payments()
    await using q = await tempQueue({ seed: files })
    for (let kill = 1; kill <= 3; kill++) {
      const r = await run(["bun", app, q.root], { env: { SPOOL_FAULT: "after-commit" } })
      expect(r.exitCode).not.toBe(0) // killed by SIGKILL right after a commit
    }
    const r = await run(["bun", app, q.root])
    expect(r.exitCode).toBe(0)
    expect(balances(q.root)).toEqual(expected)
    expect(list(join(q.root, "processing"))).toEqual([])
    expect(list(join(q.root, "inbox"))).toEqual([])
    const db = new Database(join(q.root, "ledger.db"), { readonly: true })
    const dups = db.query("SELECT COUNT(*) AS n FROM duplicates").get() as { n: number }
    db.close()
    expect(dups.n).toBe(2) // only the two real redeliveries, no recovery counted as one
  })
})
