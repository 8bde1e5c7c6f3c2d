import { Database } from "bun:sqlite"
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import { join } from "node:path"
import { repoRoot, run, spool, type TempQueue, tempQueue } from "@spool/test-support"

const stats = (args: readonly string[]) => run(["bun", join(repoRoot, "packages/consumer/bin/stats.ts"), ...args])

/**
 * Copies a row of `table` with some columns changed: history written straight into the ledger
 * without restating every column of its schema.
 */
function cloneRow(db: Database, table: string, overrides: Record<string, string | number | null>) {
  db.run(`CREATE TEMP TABLE t AS SELECT * FROM ${table} LIMIT 1`)
  const sets = Object.keys(overrides).map((k) => `${k} = $${k}`)
  db.query(`UPDATE t SET ${sets.join(", ")}`).run(
    Object.fromEntries(Object.entries(overrides).map(([k, v]) => [`$${k}`, v])),
  )
  db.run(`INSERT INTO ${table} SELECT * FROM t`)
  db.run("DROP TABLE t")
}

/** Adds history to a consumed sample: rows older than any window, a conflict, a poison, a replay. */
function addHistory(root: string) {
  const db = new Database(join(root, "ledger.db"))
  const old = "2020-01-01T00:00:00.000Z"
  const recent = new Date().toISOString()
  const ids = { id: null }
  cloneRow(db, "processed", { msg_id: "old-1", claim_id: "c-old-1", processed_at: old })
  cloneRow(db, "processed", { msg_id: "old-2", claim_id: "c-old-2", processed_at: old })
  cloneRow(db, "duplicates", { ...ids, msg_id: "old-1", is_conflict: 1, claim_id: "c-old-3", seen_at: recent })
  cloneRow(db, "duplicates", { ...ids, msg_id: "old-2", is_conflict: 0, claim_id: "c-old-4", seen_at: old })
  cloneRow(db, "failures", {
    ...ids,
    file: "p.json",
    reason: "poison",
    claim_id: "c-old-5",
    failed_at: old,
    replayed_at: null,
  })
  cloneRow(db, "failures", {
    ...ids,
    file: "r.json",
    reason: "parse",
    claim_id: "c-old-6",
    failed_at: old,
    replayed_at: recent,
  })
  db.run("INSERT INTO replays (file, failure_id, replayed_at) VALUES ('r.json', NULL, ?)", [recent])
  db.close()
}

describe("bun run stats", () => {
  // One consumed sample for the tests that read it: stats taken first, then older history added.
  let q: TempQueue
  let fresh: Awaited<ReturnType<typeof stats>>
  beforeAll(async () => {
    q = await tempQueue({ seed: "fixtures" })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    fresh = await stats(["--root", q.root, "--json"])
    addHistory(q.root)
  })
  afterAll(() => q[Symbol.asyncDispose]())

  it("reports the sample queue's outcome as JSON after a consume run", () => {
    const r = fresh
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    const s = JSON.parse(r.stdout)
    const period = {
      processed: 15,
      duplicates: 3,
      duplicateRate: 3 / 18,
      conflicts: 0,
      failures: 2,
      failuresByReason: { parse: 1, "missing-field": 1 },
      poison: 0,
      replays: 0,
    }
    expect(s.allTime).toEqual(period)
    expect(s.recent).toEqual(period)
    expect(s.duplicateIds).toBe(3)
    expect(s.openFailures).toEqual({ parse: 1, "missing-field": 1 })
    expect(s.window).toEqual({ text: "24h", ms: 86_400_000 })
    expect(Date.parse(s.lastProcessedAt)).toBeGreaterThan(Date.now() - 60_000)
  })

  it("separates all-time counts from the recent window, and counts conflicts, poison and replays", async () => {
    const s = JSON.parse((await stats(["--root", q.root, "--json", "--window", "1h"])).stdout)
    expect(s.allTime).toMatchObject({
      processed: 17,
      duplicates: 5,
      duplicateRate: 5 / 22,
      conflicts: 1,
      failures: 4,
      failuresByReason: { parse: 2, "missing-field": 1, poison: 1 },
      poison: 1,
      replays: 1,
    })
    expect(s.recent).toMatchObject({
      processed: 15,
      duplicates: 4,
      conflicts: 1,
      failures: 2,
      failuresByReason: { parse: 1, "missing-field": 1 },
      poison: 0,
      replays: 1,
    })
    expect(s.openFailures).toEqual({ parse: 1, "missing-field": 1, poison: 1 })
  })

  it("prints a table with both periods by default", async () => {
    const r = await stats(["--root", q.root, "--window", "7d"])
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    const line = (label: string) =>
      r.stdout
        .split("\n")
        .find((l) => l.trimStart().startsWith(`${label} `))
        ?.trim()
    expect(r.stdout).toMatch(/all time\s+last 7d\n/)
    expect(line("processed")).toMatch(/^processed\s+17\s+15$/)
    expect(line("duplicates")).toMatch(/^duplicates\s+5\s+4$/)
    expect(line("duplicate rate")).toMatch(/^duplicate rate\s+22\.7%\s+21\.1%$/)
    expect(line("conflicts")).toMatch(/^conflicts\s+1\s+1$/)
    expect(line("failures")).toMatch(/^failures\s+4\s+2$/)
    expect(line("parse")).toMatch(/^parse\s+2\s+1$/)
    expect(line("poison")).toMatch(/^poison\s+1\s+0$/)
    expect(line("replays")).toMatch(/^replays\s+1\s+1$/)
  })

  it("shows zeros for a queue that has never been consumed, without creating a ledger", async () => {
    await using q = await tempQueue()
    const r = await stats(["--root", q.root, "--json"])
    expect(r.exitCode).toBe(0)
    const s = JSON.parse(r.stdout)
    expect(s.allTime).toMatchObject({ processed: 0, duplicates: 0, duplicateRate: null, failures: 0 })
    expect(await Bun.file(join(q.root, "ledger.db")).exists()).toBe(false)
  })

  it.each([
    ["an unknown option", ["--bogus"]],
    ["a window that is not a duration", ["--window", "soon"]],
    ["a zero window", ["--window", "0s"]],
  ])("exits 2 for %s", async (_label, args) => {
    await using q = await tempQueue()
    const r = await stats(["--root", q.root, ...args])
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain("stats: ")
    expect(r.exitCode).toBe(2)
  })

  it("exits 2 when the root is not a queue", async () => {
    await using q = await tempQueue()
    const r = await stats(["--root", join(q.path, "nowhere")])
    expect(r.stderr).toContain("is not a spool queue")
    expect(r.exitCode).toBe(2)
  })

  it("explains itself with --help as a root package script", async () => {
    const r = await run(["bun", "run", "--silent", "stats", "--help"])
    expect(r.stdout).toContain("Usage: bun run stats")
    expect(r.stdout).toContain("--window DURATION")
    expect(r.exitCode).toBe(0)
  })
})
