// `bun run order-check`: the checked-in SQL, its copy in the root, and order-result.txt.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot, requireTool, run, spool, tempQueue } from "@spool/test-support"

const sqlSource = join(repoRoot, "packages/core/sql/order-check.sql")

const msg = (msgId: string, orderNo: string, seq: number) => ({ msg_id: msgId, order_no: orderNo, seq, amount: 1 })

/** The tests that run the SQL through the sqlite3 shell as a human would. */
const itWithSqlite3 = requireTool("sqlite3", "apt-get install sqlite3")

/**
 * A consumed queue with gaps and duplicates. X: 1,2,4 (3 missing). Y: seq 1 twice under two
 * msg_ids. Z: first seq is 3 (1 and 2 missing). W is complete, delivered out of order and once
 * more as a duplicate msg_id: no problem.
 */
async function consumedWithGaps() {
  const q = await tempQueue({
    seed: {
      "x1.json": msg("x-1", "X", 1),
      "x2.json": msg("x-2", "X", 2),
      "x4.json": msg("x-4", "X", 4),
      "y1.json": msg("y-1", "Y", 1),
      "y1-again.json": msg("y-1b", "Y", 1),
      "y2.json": msg("y-2", "Y", 2),
      "z3.json": msg("z-3", "Z", 3),
      "w2.json": msg("w-2", "W", 2),
      "w1.json": msg("w-1", "W", 1),
      "w1-redelivered.json": msg("w-1", "W", 1),
    },
  })
  expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
  return q
}
/** Y's seq 1 under two msg_ids: one duplicate row. */
const dupOfY = { "y1.json": msg("y-1", "Y", 1), "y1-again.json": msg("y-1b", "Y", 1) }
const gapsReport = "order_no,seq,problem\nX,3,missing\nY,1,duplicate\nZ,1,missing\nZ,2,missing\n"

describe("bun run order-check", () => {
  it("copies the SQL and writes OK for the consumed sample, exit 0", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    const r = await spool("order-check", ["--root", q.root])
    expect(r.stdout).toBe("OK\n")
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    expect(fs.readFileSync(join(q.root, "order-result.txt"), "utf8")).toBe("OK\n")
    expect(fs.readFileSync(join(q.root, "order-check.sql"), "utf8")).toBe(fs.readFileSync(sqlSource, "utf8"))
  })

  it("lists one row per gap and duplicated seq, including gaps before the first, exit 1", async () => {
    await using q = await consumedWithGaps()
    const r = await spool("order-check", ["--root", q.root])
    expect(r.stdout).toBe(gapsReport)
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(1)
    expect(fs.readFileSync(join(q.root, "order-result.txt"), "utf8")).toBe(gapsReport)
  })

  itWithSqlite3("copies SQL that runs unchanged in the sqlite3 shell and finds the same rows", async () => {
    await using q = await consumedWithGaps()
    expect((await spool("order-check", ["--root", q.root])).exitCode).toBe(1)
    const shell = await run(["sh", "-c", 'sqlite3 "$1/ledger.db" < "$1/order-check.sql"', "sh", q.root])
    expect(shell.stdout).toBe("X|3|missing\nY|1|duplicate\nZ|1|missing\nZ|2|missing\n")
    expect(shell.stderr).toBe("")
    expect(shell.exitCode).toBe(0)
  })

  it("finds a long gap as one row per missing seq and compares numbers, not text", async () => {
    await using q = await tempQueue({
      seed: {
        "a1.json": msg("a-1", "A", 1),
        "a2.json": msg("a-2", "A", 2),
        "a10.json": msg("a-10", "A", 10),
        "b9.json": msg("b-9", "B", 9),
        "b10.json": msg("b-10", "B", 10),
        "b1-8.json": msg("b-1", "B", 1),
      },
    })
    for (let s = 2; s <= 8; s++) q.put(`b${s}.json`, msg(`b-${s}`, "B", s))
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    const missing = [3, 4, 5, 6, 7, 8, 9].map((s) => `A,${s},missing\n`).join("")
    const r = await spool("order-check", ["--root", q.root])
    expect(r.stdout).toBe(`order_no,seq,problem\n${missing}`)
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(1)
  })

  it("lists one row per missing seq up to 100,000 rows, and each run of missing seqs as one row past them", async () => {
    // A: 1 then 100,000 (99,998 missing) and Y's duplicate: 99,999 rows, listed one by one.
    await using listed = await tempQueue({
      seed: { "a1.json": msg("a-1", "A", 1), "a.json": msg("a-e", "A", 100_000), ...dupOfY },
    })
    expect((await spool("consume", ["--root", listed.root])).exitCode).toBe(0)
    const r = await spool("order-check", ["--root", listed.root])
    expect(r.stdout.split("\n").length).toBe(1 + 99_999 + 1)
    expect(r.stdout).toStartWith("order_no,seq,problem\nA,2,missing\n")
    expect(r.stdout).toEndWith("A,99999,missing\nY,1,duplicate\n")
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(1)
    // One more seq missing, and then a gap as wide as a seq can be: ranges, at once.
    await using ranged = await tempQueue({
      seed: {
        "a1.json": msg("a-1", "A", 1),
        "a.json": msg("a-e", "A", 100_001),
        "m.json": msg("m-e", "M", Number.MAX_SAFE_INTEGER),
        ...dupOfY,
      },
    })
    expect((await spool("consume", ["--root", ranged.root])).exitCode).toBe(0)
    const wide = await spool("order-check", ["--root", ranged.root])
    const ranges =
      "order_no,first_seq,last_seq,problem\nA,2,100000,missing\nM,1,9007199254740990,missing\nY,1,1,duplicate\n"
    expect(wide.stdout).toBe(ranges)
    expect(wide.stderr).toContain("each run of missing seqs is one row (first_seq,last_seq)")
    expect(wide.exitCode).toBe(1)
    expect(fs.readFileSync(join(ranged.root, "order-result.txt"), "utf8")).toBe(ranges)
    expect(fs.readFileSync(join(ranged.root, "order-check.sql"), "utf8")).toBe(fs.readFileSync(sqlSource, "utf8"))
  })

  it("on a root no consume has run on: OK, and no ledger created, so the first consume may still choose PostgreSQL", async () => {
    await using q = await tempQueue({ seed: { "a.json": msg("a-1", "A", 1) } })
    const r = await spool("order-check", ["--root", q.root])
    expect([r.stdout, r.stderr, r.exitCode]).toEqual(["OK\n", "", 0])
    expect(fs.readFileSync(join(q.root, "order-result.txt"), "utf8")).toBe("OK\n")
    expect(fs.existsSync(join(q.root, "ledger.db"))).toBe(false)
    expect(fs.existsSync(join(q.root, ".spool"))).toBe(false)
    // A root whose history outlived its ledger is refused, not reported OK.
    fs.writeFileSync(join(q.root, "done", "x.json"), "{}")
    const lost = await spool("order-check", ["--root", q.root])
    expect(lost.stderr).toContain("done/ holds files")
    expect(lost.exitCode).toBe(2)
    expect(fs.existsSync(join(q.root, "ledger.db"))).toBe(false)
  })

  it("exits 2 for a root that is not a queue", async () => {
    await using q = await tempQueue()
    const root = join(q.path, "nowhere")
    const r = await spool("order-check", ["--root", root])
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain("is not a spool queue")
    expect(r.exitCode).toBe(2)
  })
})
