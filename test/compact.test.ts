// `bun run compact` end to end on both ledgers, from one matrix: the real commands as processes,
// on queues whose ledger rows and done/ files are aged by hand. Then what only a shared
// PostgreSQL ledger has: several roots pruned at once.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { redact } from "@spool/core/engine"
import { type BackendQueue, ledgerBackends, list, run, spool, tempDatabase, tempQueue } from "@spool/test-support"
import { SQL } from "bun"

const compact = (args: string[], env: Record<string, string> = {}) =>
  run(["bun", "run", "--silent", "compact", ...args], { env })
const day = 86_400_000

/**
 * The environment of a command run `days` from now: spool's clock set that far ahead. A file's
 * time in done/ is its ctime, which no one can set back, so the ledger's rows and the files are
 * aged together by running compact later instead.
 */
const daysLater = (days: number) => ({ SPOOL_CLOCK_OFFSET: `+${days}d` })

/** Consumes the queue; returns the environment of a compact run `days` later. */
async function consumedAndAged(q: BackendQueue, days: number) {
  expect((await q.command("consume")).exitCode).toBe(0)
  return daysLater(days)
}

/** What compact's summary line ends with: on PostgreSQL, which ledger it pruned (every root's rows). */
const whereOf = (q: BackendQueue) => (q.url === undefined ? "" : ` in ${redact(q.url)} (every root)`)

const msg = (id: string, seq: number) => ({ msg_id: id, order_no: "O-1", seq, amount: seq })

/**
 * Every file under `dir` (recursively) with its mtime and a hash of its bytes: any change shows.
 * The SQLite ledger's files are left out (reading its rows touches them); the rows are compared.
 */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const rel of new Bun.Glob("**/*").scanSync({ cwd: dir, dot: true })) {
    if (rel.startsWith("ledger.db")) continue
    const path = join(dir, rel)
    out[rel] = `${fs.statSync(path).mtimeMs} ${Bun.hash(fs.readFileSync(path))}`
  }
  return out
}

const backends = await ledgerBackends()

for (const backend of backends)
  (backend.skip ? describe.skip : describe.concurrent)(`compact on ${backend.name}`, () => {
    it.each([
      [["--older-than", "90", "--horizon", "365"], "--older-than", "90", "90d"],
      [["--older-than", "90d", "--horizon", "365"], "--horizon", "365", "365d"],
      [["--older-than", "0"], "--older-than", "0", "90d"],
    ])(
      "refuses %p, a duration without a unit, with exit 2 and the units, changing nothing",
      async (args, flag, text, example) => {
        await using q = await backend.queue({
          seed: { "a.json": msg("a", 1), "a2.json": msg("a", 1), "b.json": msg("b", 2) },
        })
        // Old enough that both readings of the number, as seconds or as days, would archive and prune.
        const later = await consumedAndAged(q, 400)
        const rows = await q.rows("SELECT msg_id FROM processed ORDER BY msg_id")
        const before = tree(q.root)
        const r = await q.command("compact", args, later)
        expect(r.stdout).toBe("")
        expect(r.stderr).toBe(
          `compact: ${flag} takes a duration with a unit (ms, s, m, h, d), such as ${example}; "${text}" has none\n`,
        )
        expect(r.exitCode).toBe(2)
        expect(tree(q.root)).toEqual(before)
        expect(await q.rows("SELECT msg_id FROM processed ORDER BY msg_id")).toEqual(rows)
      },
    )

    it("archives old done/ files and forgets old history, but keeps every idempotency key without --horizon", async () => {
      await using q = await backend.queue({
        seed: { "a.json": msg("a", 1), "b.json": msg("b", 2), "a2.json": msg("a", 1) },
      })
      const later = await consumedAndAged(q, 100)
      const r = await q.command("compact", ["--older-than", "90d"], later)
      expect(r.stdout).toBe(
        `compact: removed 3 done/ file(s) (archived), 1 duplicate record(s), 0 replayed failure(s), 0 replay record(s), 0 deletion record(s), 0 origin record(s), 0 idempotency key(s)${whereOf(q)}\n`,
      )
      expect(r.exitCode).toBe(0)
      expect(list(join(q.root, "done"))).toEqual([])
      const archived = list(join(q.root, "archive"))
      expect(archived).toHaveLength(1)
      expect(list(join(q.root, "archive", archived[0] as string))).toEqual(["a.json", "a2.json", "b.json"])
      // The keys are still there: a redelivery is still a duplicate.
      q.put("a3.json", msg("a", 1))
      expect((await q.command("consume")).exitCode).toBe(0)
      const s = await q.snapshot()
      expect(Object.keys(s.done)).toEqual(["a3.json"])
      expect(s.duplicates).toEqual([expect.objectContaining({ msg_id: "a", file: "a3.json" })])
    })

    it("forgets replayed failures and replay records of that age, and keeps the open ones", async () => {
      await using q = await backend.queue({ seed: { "bad.json": "{not json", "worse.json": "{nor this" } })
      expect((await q.command("consume")).exitCode).toBe(0)
      // Corrected in error/ first, as an operator would: the bytes that failed would only fail again.
      fs.appendFileSync(join(q.root, "error", "bad.json"), "\n")
      expect((await q.command("replay", ["bad.json"])).exitCode).toBe(0)
      const past = new Date(Date.now() - 100 * day).toISOString()
      await q.exec("UPDATE failures SET failed_at = ?", [past])
      await q.exec("UPDATE failures SET replayed_at = ? WHERE replayed_at IS NOT NULL", [past])
      await q.exec("UPDATE replays SET replayed_at = ?", [past])
      const r = await q.command("compact", ["--older-than", "90d"])
      expect(r.stdout).toBe(
        `compact: removed 0 done/ file(s) (archived), 0 duplicate record(s), 1 replayed failure(s), 1 replay record(s), 0 deletion record(s), 0 origin record(s), 0 idempotency key(s)${whereOf(q)}\n`,
      )
      expect(r.exitCode).toBe(0)
      expect(await q.rows("SELECT file, reason FROM failures")).toEqual([{ file: "worse.json", reason: "parse" }])
      expect(await q.rows("SELECT file FROM replays")).toEqual([])
    })

    it("changes nothing with --dry-run but reports the same counts", async () => {
      await using q = await backend.queue({ seed: { "a.json": msg("a", 1), "a2.json": msg("a", 1) } })
      const later = await consumedAndAged(q, 100)
      const before = await q.snapshot()
      const r = await q.command("compact", ["--older-than", "90d", "--horizon", "90d", "--dry-run"], later)
      expect(r.stdout).toBe(
        `compact: would remove 2 done/ file(s) (archived), 1 duplicate record(s), 0 replayed failure(s), 0 replay record(s), 0 deletion record(s), 0 origin record(s), 1 idempotency key(s)${whereOf(q)}\n`,
      )
      expect(r.exitCode).toBe(0)
      expect(await q.snapshot()).toEqual(before)
      expect(await q.rows("SELECT order_no FROM horizon")).toEqual([])
    })

    it("creates no ledger where there is none yet, with --dry-run or without, and says it removes nothing", async () => {
      await using q = await backend.queue()
      const before = tree(q.root)
      for (const [args, verb] of [
        [["--dry-run"], "would remove"],
        [[], "removed"],
      ] as const) {
        const r = await q.command("compact", ["--older-than", "90d", ...args])
        expect(r.stdout).toBe(
          `compact: ${verb} 0 done/ file(s) (archived), 0 duplicate record(s), 0 replayed failure(s), 0 replay record(s), 0 deletion record(s), 0 origin record(s), 0 idempotency key(s)${whereOf(q)}\n`,
        )
        expect(r.exitCode).toBe(0)
        // Nothing binds the root either: its first consume may still choose its ledger.
        expect(tree(q.root)).toEqual(before)
        expect(fs.existsSync(join(q.root, "ledger.db"))).toBe(false)
        expect(await q.tables()).toEqual([])
      }
    })

    it("prunes keys past the horizon and sends a redelivery of a pruned message to error/ as beyond-horizon", async () => {
      await using q = await backend.queue({ seed: { "a.json": msg("a", 1), "b.json": msg("b", 2) } })
      const later = await consumedAndAged(q, 400)
      const r = await q.command("compact", ["--older-than", "30d", "--horizon", "365d", "--delete"], later)
      expect(r.stdout).toContain("2 idempotency key(s)")
      expect(r.exitCode).toBe(0)
      expect(list(join(q.root, "done"))).toEqual([])
      q.put("a-again.json", msg("a", 1))
      q.put("c-new.json", msg("c", 3))
      expect((await q.command("consume")).exitCode).toBe(0)
      const s = await q.snapshot()
      expect(s.failures).toEqual([{ file: "a-again.json", original: "a-again.json", reason: "beyond-horizon" }])
      expect(s.processed.map((p) => (p as { msg_id: string }).msg_id)).toEqual(["c"])
      expect(s.errorCsv).toBe("file,reason\na-again.json,beyond-horizon\n")
      // order-check knows seqs 1..2 were pruned, not missing.
      const oc = await q.command("order-check")
      expect(oc.stdout).toBe("OK\n")
      expect(oc.exitCode).toBe(0)
    })

    it("judges a done/ file by when it reached done/, not by the mtime its producer kept", async () => {
      await using q = await backend.queue({ seed: { "old.json": msg("a", 1) } })
      // Produced a year ago with its mtime kept (touch -d, cp -p, rsync -t), consumed now.
      const yearAgo = new Date(Date.now() - 365 * day)
      fs.utimesSync(join(q.root, "inbox", "old.json"), yearAgo, yearAgo)
      expect((await q.command("consume")).exitCode).toBe(0)
      const consumedOn = new Date(fs.statSync(join(q.root, "done", "old.json")).ctimeMs).toISOString().slice(0, 10)
      const r = await q.command("compact", ["--older-than", "90d"])
      expect(r.stdout).toStartWith("compact: removed 0 done/ file(s) (archived)")
      expect(r.exitCode).toBe(0)
      expect(list(join(q.root, "done"))).toEqual(["old.json"])
      expect(fs.existsSync(join(q.root, "archive"))).toBe(false)
      // 91 days after it was consumed it goes, into the archive of the day it reached done/.
      const later = await q.command("compact", ["--older-than", "90d"], daysLater(91))
      expect(later.stdout).toStartWith("compact: removed 1 done/ file(s) (archived)")
      expect(later.exitCode).toBe(0)
      expect(list(join(q.root, "done"))).toEqual([])
      expect(list(join(q.root, "archive"))).toEqual([consumedOn])
      expect(list(join(q.root, "archive", consumedOn))).toEqual(["old.json"])
    })

    it("archives files of one name on one day under names of at most 255 bytes, and every later compact prunes", async () => {
      await using q = await backend.queue()
      // 255 and 254 bytes of UTF-8: an alternative must shorten the stem, by whole characters.
      const long = `${"é".repeat(125)}.json`
      const shorter = `a${"é".repeat(124)}.json`
      expect([Buffer.byteLength(long), Buffer.byteLength(shorter)]).toEqual([255, 254])
      for (let round = 1; round <= 3; round++) {
        // The same msg_id each time under the long name: from the second round on, a duplicate.
        q.put(long, msg("n", 1))
        q.put(shorter, msg(`m-${round}`, round + 1))
        expect((await q.command("consume")).exitCode).toBe(0)
        const r = await q.command("compact", ["--older-than", "90d"], daysLater(91))
        expect(r.stderr).toBe("")
        expect(r.stdout).toBe(
          `compact: removed 2 done/ file(s) (archived), ${round === 1 ? 0 : 1} duplicate record(s), 0 replayed failure(s), 0 replay record(s), 0 deletion record(s), 0 origin record(s), 0 idempotency key(s)${whereOf(q)}\n`,
        )
        expect(r.exitCode).toBe(0)
        expect(list(join(q.root, "done"))).toEqual([])
        expect(await q.rows("SELECT file FROM duplicates")).toEqual([])
      }
      const [day] = list(join(q.root, "archive"))
      const archived = list(join(q.root, "archive", day as string))
      expect(archived.sort()).toEqual(
        [
          long,
          `${"é".repeat(124)}~1.json`,
          `${"é".repeat(124)}~2.json`,
          shorter,
          `a${"é".repeat(123)}~1.json`,
          `a${"é".repeat(123)}~2.json`,
        ].sort(),
      )
      for (const name of archived) expect(Buffer.byteLength(name)).toBeLessThanOrEqual(255)
    })

    it("refuses a horizon shorter than the file age and a missing --older-than, changing nothing", async () => {
      await using q = await backend.queue({ seed: { "a.json": msg("a", 1) } })
      const later = await consumedAndAged(q, 100)
      const before = await q.snapshot()
      const r1 = await q.command("compact", ["--older-than", "90d", "--horizon", "30d"], later)
      expect(r1.stderr).toContain("--horizon must be at least --older-than")
      expect(r1.exitCode).toBe(2)
      const r2 = await q.command("compact", [], later)
      expect(r2.stderr).toContain("--older-than is required")
      expect(r2.exitCode).toBe(2)
      expect(await q.snapshot()).toEqual(before)
    })
  })

describe("compact on what is not spool's", () => {
  it("refuses an archive/ or a day's archive that is a symbolic link, archiving nothing outside the root", async () => {
    await using q = await tempQueue({ seed: { "a.json": msg("a", 1) } })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    const outside = join(q.path, "outside")
    fs.mkdirSync(outside)
    fs.symlinkSync(outside, join(q.root, "archive"))
    const r = await compact(["--root", q.root, "--older-than", "1d"], daysLater(2))
    expect(r.stderr).toStartWith(
      `compact: ${join(q.root, "archive")} is a symbolic link; compact archives done/ files only inside the queue root`,
    )
    expect(r.exitCode).toBe(2)
    expect(list(join(q.root, "done"))).toEqual(["a.json"])
    expect(fs.readdirSync(outside)).toEqual([])
    // The day's directory linked out, under a real archive/.
    fs.rmSync(join(q.root, "archive"))
    const today = new Date(fs.statSync(join(q.root, "done", "a.json")).ctimeMs).toISOString().slice(0, 10)
    fs.mkdirSync(join(q.root, "archive"))
    fs.symlinkSync(outside, join(q.root, "archive", today))
    const day = await compact(["--root", q.root, "--older-than", "1d"], daysLater(2))
    expect(day.stderr).toContain(`${join(q.root, "archive", today)} is a symbolic link`)
    expect(day.exitCode).toBe(2)
    expect(list(join(q.root, "done"))).toEqual(["a.json"])
    expect(fs.readdirSync(outside)).toEqual([])
  })

  it("leaves a directory in done/ alone, with --delete too", async () => {
    await using q = await tempQueue({ seed: { "a.json": msg("a", 1) } })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    fs.mkdirSync(join(q.root, "done", "sub"))
    const r = await compact(["--root", q.root, "--older-than", "1d", "--delete"], daysLater(2))
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    expect(list(join(q.root, "done"))).toEqual(["sub"])
  })
})

describe("compact --ledger", () => {
  it("refuses a PostgreSQL URL for a root bound to its SQLite ledger, and archives nothing", async () => {
    await using q = await tempQueue({ seed: { "a.json": msg("a", 1) } })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    const r = await compact(
      ["--root", q.root, "--ledger", "postgres://nobody@127.0.0.1:1/none", "--older-than", "90d"],
      daysLater(100),
    )
    expect(r.stderr).toContain("is bound to its SQLite ledger")
    expect(r.exitCode).toBe(2)
    expect(list(join(q.root, "done"))).toEqual(["a.json"])
  })

  it("refuses with --dry-run too where the real run would refuse a new ledger beside history", async () => {
    await using q = await tempQueue({ seed: { "a.json": msg("a", 1) } })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    for (const f of fs.readdirSync(q.root)) if (f.startsWith("ledger.db")) fs.rmSync(join(q.root, f))
    for (const args of [["--dry-run"], []]) {
      const r = await compact(["--root", q.root, "--older-than", "1d", ...args], daysLater(2))
      expect(r.stderr).toContain("refusing to start a new ledger")
      expect(r.exitCode).toBe(2)
      expect(fs.existsSync(join(q.root, "ledger.db"))).toBe(false)
      expect(list(join(q.root, "done"))).toEqual(["a.json"])
    }
  })

  it("says which ledger it could not open", async () => {
    await using q = await tempQueue({ seed: { "a.json": msg("a", 1) } })
    const r = await compact(["--root", q.root, "--ledger", "postgres://nobody@127.0.0.1:1/none", "--older-than", "90d"])
    expect(r.stderr).toContain("127.0.0.1:1")
    expect(r.exitCode).toBe(3)
  })
})

const pgSkip = backends.find((b) => b.name === "PostgreSQL")?.skip

;(pgSkip ? describe.skip : describe)("compact on a PostgreSQL ledger shared by several roots", () => {
  it("prunes every root's history and keys past the horizon, and only this root's done/ files", async () => {
    await using db = await tempDatabase()
    await using a = await tempQueue({ seed: { "a.json": msg("a", 1), "a2.json": msg("a", 1), "b.json": msg("b", 2) } })
    await using other = await tempQueue({ seed: { "x.json": { ...msg("x", 1), order_no: "O-2" } } })
    for (const root of [a.root, other.root])
      expect((await spool("consume", ["--root", root, "--ledger", db.url])).exitCode).toBe(0)
    const sql = new SQL({ url: db.url, max: 1 })
    const counts = async () => {
      const [c] = await sql`
        SELECT (SELECT COUNT(*)::int FROM processed) AS processed, (SELECT COUNT(*)::int FROM duplicates) AS duplicates,
               (SELECT COUNT(*)::int FROM horizon) AS horizon`
      return { ...c }
    }
    try {
      const later = daysLater(400)
      const args = ["--root", a.root, "--ledger", db.url, "--older-than", "30d", "--horizon", "365d"]

      const dry = await compact([...args, "--dry-run"], later)
      expect(dry.stdout).toStartWith(
        "compact: would remove 3 done/ file(s) (archived), 1 duplicate record(s), 0 replayed failure(s), 0 replay record(s), 0 deletion record(s), 0 origin record(s), 3 idempotency key(s) in postgres://",
      )
      expect(dry.exitCode).toBe(0)
      expect(await counts()).toEqual({ processed: 3, duplicates: 1, horizon: 0 })
      expect(list(join(a.root, "done"))).toEqual(["a.json", "a2.json", "b.json"])

      const r = await compact([...args, "--delete"], later)
      expect(r.stdout).toContain("3 done/ file(s) (deleted), 1 duplicate record(s)")
      expect(r.stdout).toContain("3 idempotency key(s)")
      expect(r.exitCode).toBe(0)
      // The other root's key went too (the ledger's horizon), its done/ file did not.
      expect(await counts()).toEqual({ processed: 0, duplicates: 0, horizon: 2 })
      expect(list(join(a.root, "done"))).toEqual([])
      expect(list(join(other.root, "done"))).toEqual(["x.json"])

      a.put("a-again.json", msg("a", 1))
      a.put("c-new.json", msg("c", 3))
      expect((await spool("consume", ["--root", a.root, "--ledger", db.url])).exitCode).toBe(0)
      expect(list(join(a.root, "error"))).toEqual(["a-again.json"])
      expect(list(join(a.root, "done"))).toEqual(["c-new.json"])
      const [f] = await sql`SELECT file, reason FROM failures`
      expect({ ...f }).toEqual({ file: "a-again.json", reason: "beyond-horizon" })
    } finally {
      await sql.close()
    }
  })
})
