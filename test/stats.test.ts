// `bun run stats` end to end on both ledgers, from one matrix: the real command as a process on
// a queue the real consume has drained, with older history written into its ledger.
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  type BackendQueue,
  ledgerBackends,
  list,
  repoRoot,
  requireTool,
  run,
  tempDir,
  tempQueue,
} from "@spool/test-support"

const stats = (q: BackendQueue, args: readonly string[]) => q.command("stats", args)

/** The tests that check the Prometheus output with `promtool check metrics`. */
const itWithPromtool = requireTool("promtool", "apt-get install prometheus")

/** `promtool check metrics` on the text. */
async function promtoolAccepts(text: string) {
  const r = await run(["promtool", "check", "metrics"], { stdin: text })
  expect(r.stderr + r.stdout).toBe("")
  expect(r.exitCode).toBe(0)
}

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
  // Its file is still in error/: stats counts the files there as open, not the rows.
  fs.writeFileSync(join(q.root, "error", "p.json"), "{}")
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

    it("counts failures by class, format and business, in --json", async () => {
      const s = JSON.parse((await stats(q, ["--json", "--window", "1h"])).stdout)
      expect(s.failuresByClass).toEqual({ allTime: { format: 3, business: 1 }, recent: { format: 2, business: 0 } })
    })

    it("exports counters by reason and class and the windowed duplicate rate", async () => {
      const r = await stats(q, ["--format", "prometheus", "--window", "1h"])
      expect(r.exitCode).toBe(0)
      const root = JSON.stringify(q.root).slice(1, -1)
      expect(r.stdout).toContain("# TYPE spool_processed_total counter\n")
      expect(r.stdout).toContain(`spool_processed_total{root="${root}"} 17\n`)
      expect(r.stdout).toContain(`spool_duplicates_total{root="${root}"} 5\n`)
      expect(r.stdout).toContain(`spool_conflicts_total{root="${root}"} 1\n`)
      expect(r.stdout).toContain(`spool_rejections_total{root="${root}",reason="parse",class="format"} 2\n`)
      expect(r.stdout).toContain(`spool_rejections_total{root="${root}",reason="poison",class="business"} 1\n`)
      expect(r.stdout).toContain(`spool_duplicate_rate{root="${root}",window="1h"} ${4 / 19}\n`)
    })

    itWithPromtool("exports metrics that promtool accepts", async () => {
      const r = await stats(q, ["--format", "prometheus", "--window", "1h"])
      expect(r.exitCode).toBe(0)
      await promtoolAccepts(r.stdout)
    })

    it("writes the metrics to --textfile atomically, and refuses --textfile without the format", async () => {
      await using d = await tempDir()
      const path = join(d.path, "spool.prom")
      const r = await stats(q, ["--format", "prometheus", "--textfile", path])
      expect(r.stdout).toBe("")
      expect(r.exitCode).toBe(0)
      expect(fs.readFileSync(path, "utf8")).toContain("spool_duplicate_rate{")
      expect(fs.readdirSync(d.path)).toEqual(["spool.prom"])
      const bad = await stats(q, ["--textfile", path])
      expect(bad.exitCode).toBe(2)
      expect(bad.stderr).toContain("--textfile writes the Prometheus format; add --format prometheus")
    })

    it("exits 1 when the window's duplicate rate is above --max-duplicate-rate, for cron", async () => {
      // The last hour: 4 duplicates of 19 valid deliveries, 21.1%.
      const over = await stats(q, ["--window", "1h", "--max-duplicate-rate", "0.2"])
      expect(over.exitCode).toBe(1)
      expect(over.stderr).toContain("duplicate rate 21.1% over the last 1h is above --max-duplicate-rate 20.0%")
      const under = await stats(q, ["--window", "1h", "--max-duplicate-rate", "25%", "--json"])
      expect(under.exitCode).toBe(0)
      expect(JSON.parse(under.stdout)).toMatchObject({ maxDuplicateRate: 0.25, ok: true })
      const bad = await stats(q, ["--max-duplicate-rate", "2"])
      expect(bad.exitCode).toBe(2)
      expect(bad.stderr).toContain("--max-duplicate-rate takes a fraction from 0 to 1 (0.05) or a percentage (5%)")
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

describe("the monitoring page's cron line for the duplicate rate", () => {
  it("runs as written on a queue, exiting 1 above the rate and 0 below it", async () => {
    const page = fs.readFileSync(join(repoRoot, "docs/monitoring.md"), "utf8")
    const line = page.split("\n").find((l) => l.startsWith("*/15 * * * * cd /opt/spool && "))
    if (line === undefined) throw new Error("docs/monitoring.md has no stats cron line")
    const command = line.slice(line.indexOf("&& ") + 3)
    await using q = await tempQueue({ seed: "fixtures" })
    expect((await run(["bun", "run", "consume", "--root", q.root], { env: { SPOOL_LEDGER_URL: "" } })).exitCode).toBe(0)
    const sh = (text: string) => run(["sh", "-c", text], { env: { SPOOL_LEDGER_URL: "" } })
    // The sample queue: 3 duplicates of 18 valid deliveries, 16.7%, above 5%.
    const over = await sh(command.replace("/srv/spool", q.root))
    expect(over.exitCode).toBe(1)
    expect(over.stderr).toContain("is above --max-duplicate-rate 5.0%")
    expect((await sh(command.replace("/srv/spool", q.root).replace("5%", "20%"))).exitCode).toBe(0)
  })
})
