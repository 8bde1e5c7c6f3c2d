// The PostgreSQL ledger, end to end: the real commands with --ledger against a real server,
// one throwaway database per test. Skipped, with the reason printed, when no server answers.
import { Database } from "bun:sqlite"
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  endState,
  generateMessages,
  list,
  makeQueueFrom,
  pgUnavailable,
  repoRoot,
  requireTool,
  rng,
  run,
  type Snapshot,
  spool,
  startConsume,
  tempDatabase,
  tempDir,
  tempQueue,
} from "@spool/test-support"
import { SQL } from "bun"

const skip = await pgUnavailable()
if (skip) console.warn(skip)
const pg = skip ? describe.skip : describe.concurrent
/** The test that runs the checked-in SQL through psql as an operator would. */
const itWithPsql = requireTool("psql", "apt-get install postgresql-client")

const hashes = (dir: string) =>
  Object.fromEntries(
    list(dir).map((n) => [n, new Bun.CryptoHasher("sha256").update(fs.readFileSync(join(dir, n))).digest("hex")]),
  )
const read = (path: string) => (fs.existsSync(path) ? fs.readFileSync(path, "utf8") : undefined)

pg("the PostgreSQL ledger (--ledger / SPOOL_LEDGER_URL)", () => {
  const cleanups: (() => Promise<void>)[] = []
  afterAll(async () => {
    for (const c of cleanups) await c()
  })

  /** The queue every kill case starts from, and the end state one uninterrupted run of it reaches. */
  const killArgs = ["--batch-size", "30"]
  let killSrc: string
  let uninterrupted: Snapshot
  beforeAll(async () => {
    const dir = await tempDir()
    cleanups.push(async () => dir[Symbol.asyncDispose]())
    killSrc = join(dir.path, "src")
    generateMessages(killSrc, 120, 3)
    const reference = join(dir.path, "reference")
    makeQueueFrom(killSrc, reference)
    await using db = await tempDatabase()
    expect((await startConsume(reference, ["--ledger", db.url, ...killArgs]).finished).exitCode).toBe(0)
    uninterrupted = await endState(reference, db.url)
  }, 60_000)

  it("consumes the sample with the same outcome as the SQLite ledger, and order-check, stats and replay work on it", async () => {
    await using db = await tempDatabase()
    await using local = await tempQueue({ seed: "fixtures" })
    await using shared = await tempQueue({ seed: "fixtures" })
    expect((await spool("consume", ["--root", local.root])).exitCode).toBe(0)
    const r = await spool("consume", ["--root", shared.root, "--ledger", db.url])
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain("processed=15 duplicates=3")
    expect(r.exitCode).toBe(0)
    expect(fs.existsSync(join(shared.root, "ledger.db"))).toBe(false)
    for (const d of ["inbox", "processing", "done", "error"])
      expect(hashes(join(shared.root, d))).toEqual(hashes(join(local.root, d)))
    for (const f of ["dup.txt", "error.csv", "conflicts.csv"])
      expect(read(join(shared.root, f))).toBe(read(join(local.root, f)))

    const oc = await spool("order-check", ["--root", shared.root], { SPOOL_LEDGER_URL: db.url })
    expect(oc.stdout).toBe("OK\n")
    expect(oc.exitCode).toBe(0)

    const st = await run(["bun", "packages/consumer/bin/stats.ts", "--root", shared.root, "--ledger", db.url, "--json"])
    expect(st.exitCode).toBe(0)
    const stats = JSON.parse(st.stdout)
    expect(stats.allTime).toMatchObject({ processed: 15, duplicates: 3, failures: 2 })
    expect(stats.openFailures).toEqual({ "missing-field": 1, parse: 1 })

    // Corrected in error/ first, as an operator would: the bytes that failed would only fail again.
    fs.appendFileSync(join(shared.root, "error", "evt-broken-0001.json"), "\n")
    const rp = await run([
      "bun",
      "scripts/replay.ts",
      "--root",
      shared.root,
      "--ledger",
      db.url,
      "evt-broken-0001.json",
    ])
    expect(rp.exitCode).toBe(0)
    expect(list(join(shared.root, "inbox"))).toEqual(["evt-broken-0001.json"])
    expect(read(join(shared.root, "error.csv"))).toBe("file,reason\nevt-noorder-0002.json,missing-field\n")
    const refused = await run(["bun", "scripts/replay.ts", "--root", shared.root, "--ledger", db.url, "nope.json"])
    expect(refused.exitCode).toBe(1)
  })

  // Each claim row lives for one batch; the dead ones slow every statement that finds claims
  // by root until a vacuum, which autovacuum may bring late or never (it is off on some servers).
  it("vacuums the claims table itself as a long run forgets its claims", async () => {
    await using t = await tempDir()
    // Two vacuums' worth of claims at the ledger's cadence, and none at a cadence of 20,000.
    generateMessages(join(t.path, "src"), 12_000, 9)
    const root = join(t.path, "q")
    makeQueueFrom(join(t.path, "src"), root)
    await using db = await tempDatabase()
    const r = await startConsume(root, ["--ledger", db.url]).finished
    expect(r.exitCode).toBe(0)
    const sql = new SQL({ url: db.url, max: 1 })
    try {
      const [row] =
        await sql`SELECT vacuum_count::int AS n, n_live_tup::int AS live FROM pg_stat_user_tables WHERE relname = 'claims'`
      expect(row.n).toBeGreaterThanOrEqual(1)
      expect(row.live).toBeLessThan(5_000)
    } finally {
      await sql.close()
    }
  }, 120_000)

  it("works on a queue made by hand with only the four directories, adding deferred/", async () => {
    await using db = await tempDatabase()
    await using dir = await tempDir()
    const root = join(dir.path, "q")
    for (const d of ["inbox", "processing", "done", "error"]) fs.mkdirSync(join(root, d), { recursive: true })
    fs.writeFileSync(join(root, "inbox", "a.json"), JSON.stringify({ msg_id: "a", order_no: "O", seq: 1, amount: 1 }))
    const r = await spool("consume", ["--root", root, "--ledger", db.url])
    expect(r.exitCode).toBe(0)
    expect(list(join(root, "done"))).toEqual(["a.json"])
    expect(list(root)).toEqual([
      ".spool",
      ".spool-root-id",
      "conflicts.csv",
      "deferred",
      "done",
      "dup.txt",
      "error",
      "error.csv",
      "inbox",
      "processing",
    ])
  })

  it("sends files whose text carries U+0000 or lone surrogates to error/ in one run, and commits their batch-mates", async () => {
    await using db = await tempDatabase()
    const msg = (id: string, extra = "") => `{"msg_id":"${id}","order_no":"o","seq":1,"amount":1${extra}}`
    const bad: Record<string, [string | Uint8Array, string, string]> = {
      // [content, reason, detail as stored: the character written as a visible escape]
      "nul-after.json": [`${msg("nul-after")}\u0000`, "parse", "JSON Parse error: Unrecognized token '\\u0000'"],
      "nul-only.json": [Buffer.of(0), "parse", "JSON Parse error: Unrecognized token '\\u0000'"],
      "nul-in-string.json": [msg("x\u0000y"), "parse", "JSON Parse error: Unterminated string"],
      "nul-escape-id.json": [
        msg("a\\u0000b"),
        "invalid-field",
        'msg_id must be well-formed Unicode without control characters (was "a\\u0000b")',
      ],
      "nul-escape-order.json": [
        '{"msg_id":"nul-escape-order","order_no":"\\u0000","seq":1,"amount":1}',
        "invalid-field",
        'order_no must be well-formed Unicode without control characters (was "\\u0000")',
      ],
      "surrogate-id.json": [
        msg("\\ud800"),
        "invalid-field",
        'msg_id must be well-formed Unicode without control characters (was "\\ud800")',
      ],
      "surrogate-bytes.json": [
        Buffer.concat([Buffer.from('{"msg_id":"'), Buffer.of(0xed, 0xa0, 0x80), Buffer.from('"}')]),
        "parse",
        "not valid UTF-8",
      ],
    }
    const good: Record<string, string> = {
      "healthy-1.json": msg("healthy-1"),
      "healthy-2.json": msg("healthy-2", ',"note":"\\u0000\\ud800","\\u0000":1'),
    }
    await using q = await tempQueue()
    for (const [name, [content]] of Object.entries(bad)) q.put(name, content)
    for (const [name, content] of Object.entries(good)) q.put(name, content)
    const r = await spool("consume", ["--root", q.root, "--ledger", db.url])
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain("processed=2")
    expect(r.exitCode).toBe(0)
    expect(list(join(q.root, "processing"))).toEqual([])
    expect(list(join(q.root, "done"))).toEqual(Object.keys(good).sort())
    expect(list(join(q.root, "error"))).toEqual(Object.keys(bad).sort())
    const sql = new SQL({ url: db.url, max: 1 })
    try {
      const failures = await sql`SELECT file, reason, detail FROM failures ORDER BY file COLLATE "C"`
      expect(failures.map((f: object) => ({ ...f }))).toEqual(
        Object.entries(bad)
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([file, [, reason, detail]]) => ({ file, reason, detail })),
      )
      const processed = await sql`SELECT msg_id FROM processed ORDER BY msg_id`
      expect(processed.map((p: { msg_id: string }) => p.msg_id)).toEqual(["healthy-1", "healthy-2"])
    } finally {
      await sql.close()
    }
  })

  it("stores ids of the longest length the message rules allow, and prunes them into the horizon", async () => {
    await using db = await tempDatabase()
    // 1024 random letters each, which no compressor shrinks much: what a PostgreSQL index entry must hold.
    const letters = (seed: number) => {
      const next = rng(seed)
      return Array.from({ length: 1024 }, () => String.fromCharCode(97 + Math.floor(next() * 26))).join("")
    }
    const [msgId, orderNo] = [letters(1), letters(2)]
    await using q = await tempQueue({
      seed: { "longest.json": { msg_id: msgId, order_no: orderNo, seq: 3, amount: 1 } },
    })
    const consumed = await spool("consume", ["--root", q.root, "--ledger", db.url])
    expect(consumed.stderr).toContain("processed=1")
    expect(consumed.exitCode).toBe(0)
    expect(list(join(q.root, "done"))).toEqual(["longest.json"])
    const pruned = await spool("compact", [
      "--root",
      q.root,
      "--ledger",
      db.url,
      "--older-than",
      "0s",
      "--horizon",
      "0s",
    ])
    expect(pruned.stderr).toBe("")
    expect(pruned.exitCode).toBe(0)
    const sql = new SQL({ url: db.url, max: 1 })
    try {
      expect((await sql`SELECT count(*)::int AS n FROM processed`)[0].n).toBe(0)
      expect([...(await sql`SELECT order_no, max_seq::int AS max_seq FROM horizon`)]).toEqual([
        { order_no: orderNo, max_seq: 3 },
      ])
    } finally {
      await sql.close()
    }
  })

  it("lists a gap as wide as a seq can be as one range, without running order-check.sql on the server", async () => {
    await using db = await tempDatabase()
    await using q = await tempQueue({
      seed: {
        "m.json": { msg_id: "m-e", order_no: "M", seq: Number.MAX_SAFE_INTEGER, amount: 1 },
        "n2.json": { msg_id: "n-2", order_no: "N", seq: 2, amount: 1 },
      },
    })
    expect((await spool("consume", ["--root", q.root, "--ledger", db.url])).exitCode).toBe(0)
    const r = await spool("order-check", ["--root", q.root, "--ledger", db.url])
    expect(r.stdout).toBe("order_no,first_seq,last_seq,problem\nM,1,9007199254740990,missing\nN,1,1,missing\n")
    expect(r.exitCode).toBe(1)
    const sql = new SQL({ url: db.url, max: 1 })
    try {
      const running =
        await sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
      expect(running[0].n).toBe(0)
    } finally {
      await sql.close()
    }
  })

  itWithPsql("runs order-check.sql unchanged in psql and finds the same problems as on SQLite", async () => {
    await using db = await tempDatabase()
    const msgs = {
      "x1.json": { msg_id: "x1", order_no: "X", seq: 1, amount: 1 },
      "x4.json": { msg_id: "x4", order_no: "X", seq: 4, amount: 1 },
      "y1.json": { msg_id: "y1", order_no: "Y", seq: 1, amount: 1 },
      "y1b.json": { msg_id: "y1b", order_no: "Y", seq: 1, amount: 1 },
    }
    await using local = await tempQueue({ seed: msgs })
    await using shared = await tempQueue({ seed: msgs })
    await spool("consume", ["--root", local.root])
    await spool("consume", ["--root", shared.root, "--ledger", db.url])
    const a = await spool("order-check", ["--root", local.root])
    const b = await spool("order-check", ["--root", shared.root, "--ledger", db.url])
    expect(b.stdout).toBe(a.stdout)
    expect(b.exitCode).toBe(1)
    const sqlFile = join(repoRoot, "packages/core/sql/order-check.sql")
    const viaPsql = await run(["psql", db.url, "-At", "-F", "|", "-f", sqlFile])
    const sqlite = new Database(join(local.root, "ledger.db"), { readonly: true })
    const expected = (sqlite.query(fs.readFileSync(sqlFile, "utf8")).all() as Record<string, unknown>[])
      .map((r) => `${r.order_no}|${r.seq}|${r.problem}`)
      .join("\n")
    sqlite.close()
    expect(viaPsql.stdout.trim()).toBe(expected)
    expect(expected).toBe("X|2|missing\nX|3|missing\nY|1|duplicate")
  })

  it("processes every msg_id exactly once across separate roots that receive overlapping deliveries", async () => {
    await using db = await tempDatabase()
    await using dir = await tempDir()
    const random = rng(42)
    const roots = [0, 1, 2].map((i) => join(dir.path, `host-${i}`))
    const deliveries = new Map<string, number>()
    for (const root of roots) {
      for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
      for (let m = 0; m < 300; m++) {
        if (random() < 0.45) continue
        const copies = random() < 0.1 ? 2 : 1 // sometimes redelivered to the same host too
        for (let c = 0; c < copies; c++) {
          const body = { msg_id: `m-${m}`, order_no: `O-${m % 17}`, seq: Math.floor(m / 17) + 1, amount: m / 4 }
          fs.writeFileSync(join(root, "inbox", `m-${m}-${c}.json`), JSON.stringify(body))
          deliveries.set(`m-${m}`, (deliveries.get(`m-${m}`) ?? 0) + 1)
        }
      }
    }
    const runs = await Promise.all(
      roots.map((root) => startConsume(root, ["--ledger", db.url, "--batch-size", "37"]).finished),
    )
    for (const r of runs) {
      expect(r.stderr).not.toMatch(/deadlock|locked|unexpected/i)
      expect(r.exitCode).toBe(0)
    }
    const sql = new SQL({ url: db.url, max: 1 })
    cleanups.push(() => sql.close())
    const processed = (await sql`SELECT msg_id FROM processed`) as { msg_id: string }[]
    const [dups] = (await sql`SELECT COUNT(*)::int AS n FROM duplicates`) as { n: number }[]
    expect(processed.length).toBe(deliveries.size)
    expect(new Set(processed.map((p) => p.msg_id))).toEqual(new Set(deliveries.keys()))
    const total = [...deliveries.values()].reduce((a, b) => a + b, 0)
    expect(dups?.n).toBe(total - deliveries.size)
    const repeated = [...deliveries].filter(([, n]) => n > 1).map(([id]) => id)
    const expectedDupTxt = `${repeated.sort().join("\n")}\n`
    // Every root's dup.txt reflects the shared ledger once the last consumer has written it.
    const last = roots.map((r) => read(join(r, "dup.txt")))
    expect(last).toContain(expectedDupTxt)
    for (const root of roots) {
      expect(list(join(root, "inbox"))).toEqual([])
      expect(list(join(root, "processing"))).toEqual([])
    }
    const [claims] = (await sql`SELECT COUNT(*)::int AS n FROM claims`) as { n: number }[]
    expect(claims?.n).toBe(0)
  })

  it("gives each file of one shared root to exactly one of several consumers", async () => {
    await using db = await tempDatabase()
    await using dir = await tempDir()
    const src = join(dir.path, "src")
    fs.mkdirSync(src)
    const mix = generateMessages(src, 600, 7)
    const root = join(dir.path, "root")
    makeQueueFrom(src, root)
    const runs = await Promise.all(
      [0, 1, 2].map(() => startConsume(root, ["--ledger", db.url, "--batch-size", "50"]).finished),
    )
    for (const r of runs) expect(r.exitCode).toBe(0)
    const s = await endState(root, db.url)
    expect(Object.keys(s.inbox)).toEqual([])
    expect(Object.keys(s.processing)).toEqual([])
    expect(Object.keys(s.done).length + Object.keys(s.error).length).toBe(list(src).length)
    expect(s.processed.length).toBe(mix.valid)
    expect(s.claims).toEqual([])
  })

  it.each(["after-claim", "after-commit", "after-move", "after-reports"])(
    "recovers from a kill %s exactly as from no kill at all",
    async (step) => {
      await using db = await tempDatabase()
      await using dir = await tempDir()
      const killed = join(dir.path, "killed")
      makeQueueFrom(killSrc, killed)
      const k = await startConsume(killed, ["--ledger", db.url, ...killArgs], {
        SPOOL_FAULT: `${step}@${step === "after-reports" ? 1 : 2}`,
      }).finished
      expect(k.signalCode).toBe("SIGKILL")
      const r = await startConsume(killed, ["--ledger", db.url, ...killArgs]).finished
      expect(r.exitCode).toBe(0)
      expect(await endState(killed, db.url)).toEqual(uninterrupted)
    },
  )
})

pg("a transient PostgreSQL fault while a file is retried alone", () => {
  it("is a clean failure, not a crash: it costs the file no attempt, so it is never made poison", async () => {
    await using db = await tempDatabase()
    await using q = await tempQueue({
      seed: Object.fromEntries(
        Array.from({ length: 5 }, (_, i) => [
          `m-${i}.json`,
          { msg_id: `id-${i}`, order_no: "A", seq: i + 1, amount: i },
        ]),
      ),
    })
    const counter = join(q.path, "cuts")
    const app = join(repoRoot, "test/apps/pg-connection-lost.ts")
    // m-2's commit loses its connection three times: in its batch, then twice retried alone.
    // Counted as crashes, those retries would make it poison at the default --max-attempts.
    const exits: number[] = []
    for (let i = 0; i < 8; i++) {
      const r = await run(["bun", app, q.root, db.url, "m-2.json", "3", counter])
      exits.push(r.exitCode)
      if (r.exitCode === 0) break
    }
    expect(exits).toEqual([3, 3, 3, 0])
    expect(fs.readFileSync(counter, "utf8")).toBe("3")
    expect(list(join(q.root, "done"))).toEqual(["m-0.json", "m-1.json", "m-2.json", "m-3.json", "m-4.json"])
    expect(list(join(q.root, "error"))).toEqual([])
    expect(list(join(q.root, "processing"))).toEqual([])
  })
})

describe("schema migrations", () => {
  it("upgrades a version-1 SQLite ledger in place without losing a row", async () => {
    await using q = await tempQueue({ seed: { "new.json": { msg_id: "new", order_no: "O", seq: 2, amount: 2.5 } } })
    const db = new Database(join(q.root, "ledger.db"))
    db.exec(fs.readFileSync(join(repoRoot, "packages/core/sql/sqlite/0001-init.sql"), "utf8"))
    db.exec("PRAGMA user_version = 1")
    db.run(
      "INSERT INTO processed (msg_id, order_no, seq, amount, file, payload_hash, content_hash, claim_id, processed_at) VALUES ('old', 'O', 1, '1.10', 'old.json', 'h', 'c', 'k', '2025-01-01T00:00:00.000Z')",
    )
    db.close()
    const r = await spool("consume", ["--root", q.root])
    expect(r.exitCode).toBe(0)
    const after = new Database(join(q.root, "ledger.db"), { readonly: true })
    expect(after.query("PRAGMA user_version").get()).toEqual({ user_version: 7 })
    // Version 3 dropped two indexes that every message paid for and no query of spool's needs.
    expect(
      after.query("SELECT name FROM sqlite_master WHERE name IN ('claims_owner', 'processed_order_seq')").all(),
    ).toEqual([])
    expect(after.query("SELECT msg_id, amount, result FROM processed ORDER BY msg_id").all()).toEqual([
      { msg_id: "new", amount: "2.5", result: null },
      { msg_id: "old", amount: "1.10", result: null },
    ])
    expect(after.query("SELECT COUNT(*) AS n FROM horizon").get()).toEqual({ n: 0 })
    // Version 6 keeps the origin of each delivery a broker sent; a file queue writes none.
    expect(after.query("SELECT COUNT(*) AS n FROM origins").get()).toEqual({ n: 0 })
    // Version 7 logs deletions and marks a deleted file's failure; a consume writes neither.
    expect(after.query("SELECT COUNT(*) AS n FROM deletions").get()).toEqual({ n: 0 })
    expect(after.query("SELECT COUNT(*) AS n FROM failures WHERE deleted_at IS NOT NULL").get()).toEqual({ n: 0 })
    after.close()
    const oc = await spool("order-check", ["--root", q.root])
    expect(oc.stdout).toBe("OK\n")
  })

  pg("on PostgreSQL", () => {
    it("upgrades a version-1 PostgreSQL ledger in place without losing a row", async () => {
      await using db = await tempDatabase()
      const sql = new SQL({ url: db.url, max: 1 })
      await sql.unsafe(fs.readFileSync(join(repoRoot, "packages/core/sql/postgres/0001-init.sql"), "utf8"))
      await sql`CREATE TABLE spool_schema (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`
      await sql`INSERT INTO spool_schema VALUES (1, '2025-01-01T00:00:00.000Z')`
      await sql`INSERT INTO processed (msg_id, order_no, seq, amount, file, root_id, payload_hash, content_hash, claim_id, processed_at)
                VALUES ('old', 'O', 1, '1.10', 'old.json', 'r', 'h', 'c', 'k', '2025-01-01T00:00:00.000Z')`
      await using q = await tempQueue({ seed: { "new.json": { msg_id: "new", order_no: "O", seq: 2, amount: 2.5 } } })
      const r = await spool("consume", ["--root", q.root, "--ledger", db.url])
      expect(r.exitCode).toBe(0)
      expect(await sql`SELECT version FROM spool_schema ORDER BY version`).toEqual([
        { version: 1 },
        { version: 2 },
        { version: 3 },
        { version: 4 },
        { version: 5 },
        { version: 6 },
        { version: 7 },
        { version: 8 },
      ])
      // Version 8 dropped the two indexes SQLite's version 3 dropped.
      expect(
        await sql`SELECT indexname FROM pg_indexes WHERE indexname IN ('claims_owner', 'processed_order_seq')`,
      ).toEqual([])
      expect(await sql`SELECT count(*)::int AS n FROM origins`).toEqual([{ n: 0 }])
      expect(await sql`SELECT count(*)::int AS n FROM deletions`).toEqual([{ n: 0 }])
      expect(await sql`SELECT msg_id, amount FROM processed ORDER BY msg_id`).toEqual([
        { msg_id: "new", amount: "2.5" },
        { msg_id: "old", amount: "1.10" },
      ])
      await sql.close()
    })
  })
})
