// The README's quick start, run the way a new user runs it: `bun run ...` from the repo root.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { redact } from "@spool/core/engine"
import { fixturesDir, list, pgUnavailable, run, tempDatabase, tempDir } from "@spool/test-support"

const noPostgres = await pgUnavailable()
if (noPostgres) console.warn(noPostgres)

function processedRows(root: string): number {
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    return (db.query("SELECT count(*) AS n FROM processed").get() as { n: number }).n
  } finally {
    db.close()
  }
}

describe("quick start", () => {
  it("bun run setup, consume and order-check give 18 done, 2 error, 15 processed, 3 duplicates, OK", async () => {
    await using d = await tempDir()
    const root = join(d.path, "spool")

    const setup = await run(["bun", "run", "setup", "--root", root, "--from", fixturesDir])
    expect(setup.stdout).toBe("")
    expect(setup.stderr).toContain(`setup: queue ready at ${root}; copied 20 message(s)`)
    expect(setup.exitCode).toBe(0)

    const consume = await run(["bun", "run", "consume", "--root", root])
    expect(consume.stdout).toBe("")
    expect(consume.stderr).toMatch(
      /level=notice msg=done files=20 processed=15 duplicates=3 conflicts=0 rejected=2 reasons.missing-field=1 reasons.parse=1 recovered=0 seconds=[\d.]+\n$/,
    )
    expect(consume.exitCode).toBe(0)

    const check = await run(["bun", "run", "order-check", "--root", root])
    expect(check.stdout).toBe("OK\n")
    expect(check.exitCode).toBe(0)

    expect(list(join(root, "done"))).toHaveLength(18)
    expect(list(join(root, "error"))).toEqual(["evt-broken-0001.json", "evt-noorder-0002.json"])
    expect(list(join(root, "inbox"))).toEqual([])
    expect(list(join(root, "processing"))).toEqual([])
    expect(processedRows(root)).toBe(15)
    expect(fs.readFileSync(join(root, "dup.txt"), "utf8").split("\n").filter(Boolean)).toHaveLength(3)
    expect(fs.readFileSync(join(root, "error.csv"), "utf8")).toBe(
      "file,reason\nevt-broken-0001.json,parse\nevt-noorder-0002.json,missing-field\n",
    )
    expect(fs.readFileSync(join(root, "order-result.txt"), "utf8")).toBe("OK\n")
  })

  it("bun run demo prints the same outcome for a queue named by SPOOL_ROOT", async () => {
    await using d = await tempDir()
    const root = join(d.path, "spool")
    const demo = await run(["bun", "run", "demo"], { env: { SPOOL_ROOT: root } })
    expect(demo.stdout).toContain(`Outcome in ${root}`)
    expect(demo.stdout).toMatch(/done\/\s+18 files\n/)
    expect(demo.stdout).toMatch(/error\/\s+2 files\n/)
    expect(demo.stdout).toMatch(/processing\/\s+0 files\n/)
    expect(demo.stdout).toMatch(/inbox\/\s+0 files\n/)
    expect(demo.stdout).toMatch(/processed\s+15 rows/)
    expect(demo.stdout).toMatch(/dup\.txt\s+m-1001-02 m-1002-02 m-1004-01\n/)
    expect(demo.stdout).toMatch(/order-check\s+OK\n/)
    expect(demo.stderr).toMatch(/msg=done files=20 processed=15 duplicates=3 /)
    expect(demo.exitCode).toBe(0)
    expect(processedRows(root)).toBe(15)
    // The outcome starts at the line's start, the lines under it indented by two.
    expect(demo.stdout).toContain(`\nOutcome in ${root}\n  done/        18 files\n`)
  })

  it.skipIf(noPostgres !== undefined)(
    "bun run demo consumes into the ledger SPOOL_LEDGER_URL names, and counts its rows there",
    async () => {
      await using d = await tempDir()
      await using db = await tempDatabase()
      const root = join(d.path, "spool")
      const demo = await run(["bun", "run", "demo"], { env: { SPOOL_ROOT: root, SPOOL_LEDGER_URL: db.url } })
      expect(demo.stderr).not.toContain("unexpected failure")
      expect(demo.stdout).toContain(`processed    15 rows in the ledger at ${redact(db.url)} (one per distinct msg_id)`)
      expect(demo.stdout).toMatch(/order-check\s+OK\n/)
      expect(demo.exitCode).toBe(0)
      expect(list(root)).not.toContain("ledger.db")
    },
  )

  it("bun run demo --help and --version say what it does and do nothing, -q prints nothing", async () => {
    await using d = await tempDir()
    const root = join(d.path, "spool")
    const help = await run(["bun", "run", "demo", "--help"], { env: { SPOOL_ROOT: root } })
    expect(help.stdout).toStartWith("Usage: bun run demo\n")
    expect(help.exitCode).toBe(0)
    expect((await run(["bun", "run", "demo", "--version"], { env: { SPOOL_ROOT: root } })).stdout).toMatch(/^spool \d/)
    const extra = await run(["bun", "run", "demo", "now"], { env: { SPOOL_ROOT: root } })
    expect(extra.stderr).toContain("demo takes no arguments")
    expect(extra.exitCode).toBe(2)
    expect(fs.existsSync(root)).toBe(false)
    const quiet = await run(["bun", "run", "demo", "-q"], { env: { SPOOL_ROOT: root } })
    expect(quiet.stdout).toBe("")
    expect(quiet.exitCode).toBe(0)
    expect(processedRows(root)).toBe(15)
  })
})
