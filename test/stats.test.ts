// `bun run stats` end to end on both ledgers, from one matrix: the real command as a process on
// a queue the real consume has drained, with older history written into its ledger.
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import { join } from "node:path"
import { type BackendQueue, ledgerBackends, list, run } from "@spool/test-support"

const stats = (q: BackendQueue, args: readonly string[]) => q.command("stats", args)

/** Adds history to a consumed sample: rows older than any window, a conflict, a poison, a replay. */
async function addHistory(q: BackendQueue) {
  const old = "2020-01-01T00:00:00.000Z"
  const recent = new Date().toISOString()
  const hashes = { payload_hash: "p", content_hash: "c" }
  for (const [msgId, seq] of [
    ["old-1", 1],
    ["old-2", 2],
  ] as const)
    await q.insert("processed", {
      msg_id: msgId,
      order_no: "O-old",
      seq,
      amount: "1",
      file: `${msgId}.json`,
      ...hashes,
      claim_id: `c-${msgId}`,
      processed_at: old,
    })
  const duplicate = { file: "d.json", ...hashes }
  await q.insert("duplicates", { ...duplicate, msg_id: "old-1", is_conflict: 1, claim_id: "c-old-3", seen_at: recent })
  await q.insert("duplicates", { ...duplicate, msg_id: "old-2", is_conflict: 0, claim_id: "c-old-4", seen_at: old })
  const failure = { detail: "", payload_hash: null, failed_at: old }
  await q.insert("failures", {
    ...failure,
    file: "p.json",
    original: "p.json",
    reason: "poison",
    claim_id: "c-old-5",
    replayed_at: null,
  })
  await q.insert("failures", {
    ...failure,
    file: "r.json",
    original: "r.json",
    reason: "parse",
    claim_id: "c-old-6",
    replayed_at: recent,
  })
  await q.insert("replays", { file: "r.json", failure_id: null, replayed_at: recent })
}

for (const backend of await ledgerBackends())
  (backend.skip ? describe.skip : describe)(`bun run stats on ${backend.name}`, () => {
    // One consumed sample for the tests that read it: stats taken first, then older history added.
    let q: BackendQueue
    let fresh: Awaited<ReturnType<typeof stats>>
    beforeAll(async () => {
      q = await backend.queue({ seed: "fixtures" })
      expect((await q.command("consume")).exitCode).toBe(0)
      fresh = await stats(q, ["--json"])
      await addHistory(q)
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
      const s = JSON.parse((await stats(q, ["--json", "--window", "1h"])).stdout)
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
      const r = await stats(q, ["--window", "7d"])
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
      expect(line("parse")).toMatch(/^parse \(format\)\s+2\s+1$/)
      expect(line("format errors")).toMatch(/^format errors\s+3\s+2$/)
      expect(line("business errors")).toMatch(/^business errors\s+1\s+0$/)
      expect(r.stdout).toMatch(/\npoison\s+1\s+0\n/)
      expect(line("poison (business)")).toMatch(/^poison \(business\)\s+1\s+0$/)
      expect(line("replays")).toMatch(/^replays\s+1\s+1$/)
    })

    it("shows zeros for a queue that has never been consumed, creating nothing in the root or the ledger", async () => {
      await using fresh = await backend.queue()
      const before = list(fresh.root)
      const r = await stats(fresh, ["--json"])
      expect(r.stderr).toBe("")
      expect(r.exitCode).toBe(0)
      const s = JSON.parse(r.stdout)
      expect(s.allTime).toMatchObject({ processed: 0, duplicates: 0, duplicateRate: null, failures: 0 })
      expect(list(fresh.root)).toEqual(before)
      expect(await fresh.tables()).toEqual([])
    })

    it.each([
      ["an unknown option", ["--bogus"]],
      ["a window that is not a duration", ["--window", "soon"]],
      ["a zero window", ["--window", "0s"]],
    ])("exits 2 for %s", async (_label, args) => {
      const r = await stats(q, args)
      expect(r.stdout).toBe("")
      expect(r.stderr).toContain("stats: ")
      expect(r.exitCode).toBe(2)
    })

    it("exits 2 when the root is not a queue", async () => {
      const r = await run(["bun", "packages/consumer/bin/stats.ts", "--root", join(q.root, "nowhere"), ...q.ledgerArgs])
      expect(r.stderr).toContain("is not a spool queue")
      expect(r.exitCode).toBe(2)
    })
  })

describe("bun run stats --help", () => {
  it("explains itself as a root package script", async () => {
    const r = await run(["bun", "run", "--silent", "stats", "--help"])
    expect(r.stdout).toContain("Usage: bun run stats")
    expect(r.stdout).toContain("--window DURATION")
    expect(r.exitCode).toBe(0)
  })
})
