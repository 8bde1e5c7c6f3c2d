// `bun run verify`, end to end: the full integrity check and spool's own consistency checks.
// The case it exists for: one flipped bit in the msg_id PRIMARY KEY's index page, which
// quick_check does not see and which lets a redelivery be processed a second time.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { list, pgUnavailable, repoRoot, run, spool, tempDatabase, tempQueue } from "@spool/test-support"
import { SQL } from "bun"

const slow = 60_000
const noPostgres = await pgUnavailable()
if (noPostgres) console.warn(noPostgres)

const verify = (args: readonly string[]) => run(["bun", join(repoRoot, "packages/consumer/bin/verify.ts"), ...args])
const msg = (id: string, seq: number) => ({ msg_id: id, order_no: "F", seq, amount: 1 })
const flips = Object.fromEntries(
  Array.from({ length: 9 }, (_, i) => [`flip-0${i + 1}.json`, msg(`flip-0${i + 1}`, i + 1)]),
)

interface Report {
  ok: boolean
  backend: string
  checks: { name: string; status: string; found: number; problems: string[]; note?: string }[]
}
const statuses = (r: Report) => Object.fromEntries(r.checks.map((c) => [c.name, c.status]))
const problemsOf = (r: Report, name: string) => r.checks.find((c) => c.name === name)?.problems

/**
 * Flips the lowest bit of one byte on disk: the last character of `key` in the leaf page of
 * `index`, so the index entry of "flip-05" reads "flip-04" while its table row is unchanged.
 */
function flipIndexKey(ledger: string, index: string, key: string): void {
  const db = new Database(ledger)
  const { rootpage } = db.query("SELECT rootpage FROM sqlite_master WHERE name = ?").get(index) as { rootpage: number }
  const { page_size } = db.query("PRAGMA page_size").get() as { page_size: number }
  // Nine short keys fit one page: the root page is the only leaf.
  expect(db.query("SELECT count(*) AS n FROM dbstat WHERE name = ?").get(index)).toEqual({ n: 1 })
  db.close()
  expect(fs.existsSync(`${ledger}-wal`)).toBe(false)
  const fd = fs.openSync(ledger, "r+")
  try {
    const page = Buffer.alloc(page_size)
    fs.readSync(fd, page, 0, page_size, (rootpage - 1) * page_size)
    const at = page.indexOf(key)
    expect(at).toBeGreaterThan(0)
    expect(page.indexOf(key, at + 1)).toBe(-1)
    const offset = (rootpage - 1) * page_size + at + key.length - 1
    const byte = Buffer.from([(page[at + key.length - 1] as number) ^ 0x01])
    fs.writeSync(fd, byte, 0, 1, offset)
  } finally {
    fs.closeSync(fd)
  }
}

function quickCheck(ledger: string): unknown {
  const db = new Database(ledger, { readonly: true })
  try {
    return db.query("PRAGMA quick_check").all()
  } finally {
    db.close()
  }
}

describe("bun run verify on a SQLite ledger", () => {
  it("prints its usage for --help, and passes every check on a healthy ledger (--json)", async () => {
    const help = await verify(["--help"])
    expect(help.stdout).toContain("Usage: bun run verify [--root DIR] [--ledger URL] [--json]")
    expect(help.stdout).toContain("Exit codes: 0 ok, 1 check failed")
    expect(help.exitCode).toBe(0)

    await using q = await tempQueue({ seed: "fixtures" })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    const r = await verify(["--root", q.root, "--json"])
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    const report = JSON.parse(r.stdout) as Report
    expect(report.ok).toBe(true)
    expect(report.backend).toBe("sqlite")
    expect(statuses(report)).toEqual({
      integrity: "ok",
      "duplicate-msg-id": "ok",
      "duplicate-claim": "ok",
      "claim-without-consumer": "ok",
    })
  })

  it("finds nothing to check, exit 0, on a root no consume has run on, and creates nothing there", async () => {
    await using q = await tempQueue({ seed: { "a.json": msg("a-1", 1) } })
    const r = await verify(["--root", q.root])
    expect(r.stdout).toContain("no ledger yet, nothing to check")
    expect(r.exitCode).toBe(0)
    const json = await verify(["--root", q.root, "--json"])
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, backend: null, checks: [] })
    expect(json.exitCode).toBe(0)
    expect(fs.readdirSync(q.root).sort()).toEqual(["deferred", "done", "error", "inbox", "processing", "tmp"])
    // A root whose history outlived its ledger is refused, as consume refuses it.
    fs.writeFileSync(join(q.root, "done", "x.json"), "{}")
    const lost = await verify(["--root", q.root])
    expect(lost.stderr).toContain("done/ holds files")
    expect(lost.exitCode).toBe(2)
  })

  it(
    "finds a flipped bit in the PRIMARY KEY's index that quick_check passes, and the doubled effect it lets through",
    async () => {
      await using q = await tempQueue({ seed: flips })
      expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
      const ledger = join(q.root, "ledger.db")
      flipIndexKey(ledger, "sqlite_autoindex_processed_1", "flip-05")
      expect(quickCheck(ledger)).toEqual([{ quick_check: "ok" }])

      const before = await verify(["--root", q.root])
      expect(before.stdout).toContain("FAILED   integrity")
      expect(before.stdout).toContain("missing from index sqlite_autoindex_processed_1")
      expect(before.stdout).toContain("ok       duplicate-msg-id")
      expect(before.stderr).toContain("verify: integrity failed.")
      expect(before.exitCode).toBe(1)

      // The index no longer finds flip-05, so its redelivery is taken for a new message.
      q.put("flip-05-again.json", msg("flip-05", 5))
      const doubled = await spool("consume", ["--root", q.root])
      expect(doubled.stderr).toContain("processed=1 duplicates=0")
      expect(doubled.exitCode).toBe(0)
      expect(list(join(q.root, "done"))).toContain("flip-05-again.json")

      const after = await verify(["--root", q.root, "--json"])
      expect(after.exitCode).toBe(1)
      const report = JSON.parse(after.stdout) as Report
      expect(report.ok).toBe(false)
      expect(statuses(report)).toMatchObject({ integrity: "failed", "duplicate-msg-id": "failed" })
      expect(problemsOf(report, "duplicate-msg-id")).toEqual([
        "msg_id 'flip-05': 2 processed rows (files flip-05.json, flip-05-again.json)",
      ])
    },
    slow,
  )

  it("finds a claim whose owner has no consumers row", async () => {
    await using q = await tempQueue({ seed: { "a.json": msg("a", 1) } })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    const db = new Database(join(q.root, "ledger.db"))
    db.run(
      "INSERT INTO claims (name, claim_id, owner_id, attempts, state, claimed_at) VALUES ('b.json', 'x.1', 'gone', 1, 'claimed', 't')",
    )
    db.close()
    const r = await verify(["--root", q.root, "--json"])
    expect(r.exitCode).toBe(1)
    expect(problemsOf(JSON.parse(r.stdout) as Report, "claim-without-consumer")).toEqual([
      "file 'b.json' is claimed by 'gone', which has no consumers row",
    ])
  })
})

describe.skipIf(noPostgres !== undefined)("bun run verify on a PostgreSQL ledger", () => {
  it(
    "skips integrity without amcheck, checks every index with it, and finds a row its PRIMARY KEY's index lacks",
    async () => {
      await using db = await tempDatabase()
      await using q = await tempQueue({ seed: "fixtures" })
      expect((await spool("consume", ["--root", q.root, "--ledger", db.url])).exitCode).toBe(0)

      const without = await verify(["--root", q.root, "--ledger", db.url, "--json"])
      expect(without.exitCode).toBe(0)
      const skipped = JSON.parse(without.stdout) as Report
      expect(statuses(skipped)).toEqual({
        integrity: "skipped",
        "duplicate-msg-id": "ok",
        "duplicate-claim": "ok",
        "claim-without-consumer": "ok",
      })
      expect(skipped.checks[0]?.note).toContain("CREATE EXTENSION amcheck")

      const admin = new SQL({ url: db.url, max: 1 })
      try {
        await admin`CREATE EXTENSION amcheck`
        const healthy = await verify(["--root", q.root, "--ledger", db.url, "--json"])
        expect(healthy.exitCode).toBe(0)
        expect(statuses(JSON.parse(healthy.stdout) as Report).integrity).toBe("ok")
        // What a damaged index does, made on purpose: an insert that the PRIMARY KEY's index
        // does not record (the index not ready for it), so the row is a second m-1001-01.
        await admin`UPDATE pg_index SET indisready = false WHERE indexrelid = 'processed_pkey'::regclass`
      } finally {
        await admin.close()
      }
      const writer = new SQL({ url: db.url, max: 1 })
      try {
        await writer`INSERT INTO processed (msg_id, order_no, seq, amount, file, root_id, payload_hash, content_hash, claim_id, processed_at)
          SELECT msg_id, order_no, seq, amount, 'again.json', root_id, payload_hash, content_hash, claim_id || '.again', processed_at
          FROM processed WHERE msg_id = 'm-1001-01'`
        await writer`UPDATE pg_index SET indisready = true WHERE indexrelid = 'processed_pkey'::regclass`
      } finally {
        await writer.close()
      }
      const r = await verify(["--root", q.root, "--ledger", db.url, "--json"])
      expect(r.exitCode).toBe(1)
      const report = JSON.parse(r.stdout) as Report
      expect(report.backend).toBe("postgres")
      expect(statuses(report)).toMatchObject({ integrity: "failed", "duplicate-msg-id": "failed" })
      expect(problemsOf(report, "integrity")?.[0]).toContain('lacks matching index tuple within index "processed_pkey"')
      expect(problemsOf(report, "duplicate-msg-id")?.[0]).toStartWith("msg_id 'm-1001-01': 2 processed rows")
    },
    slow,
  )
})
