// A root knows its ledger: every command opens the ledger the root is bound to, or refuses with
// exit 2 and creates nothing. Real commands as processes, real PostgreSQL databases.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { isStopped, list, pgUnavailable, repoRoot, run, spool, tempDatabase, tempQueue } from "@spool/test-support"
import { SQL } from "bun"

const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)
const pg = pgSkip ? describe.skip : describe.concurrent

const binding = (root: string) => JSON.parse(fs.readFileSync(join(root, ".spool", "ledger"), "utf8"))

/** The tables spool made in a database (none: nothing was created there). */
async function spoolTables(url: string): Promise<string[]> {
  const sql = new SQL({ url, max: 1 })
  try {
    const rows = await sql`SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`
    return rows.map((r: { tablename: string }) => r.tablename)
  } finally {
    await sql.close()
  }
}

/** Every command that opens a root's ledger, as a user runs it. */
const commands: [string, (root: string, env: Record<string, string>, extra?: string[]) => ReturnType<typeof run>][] = [
  ["consume", (root, env, extra = []) => spool("consume", ["--root", root, ...extra], env)],
  ["order-check", (root, env, extra = []) => spool("order-check", ["--root", root, ...extra], env)],
  [
    "stats",
    (root, env, extra = []) => run(["bun", "packages/consumer/bin/stats.ts", "--root", root, ...extra], { env }),
  ],
  [
    "compact",
    (root, env, extra = []) =>
      run(["bun", "packages/consumer/bin/compact.ts", "--root", root, "--older-than", "90d", ...extra], { env }),
  ],
  [
    "verify",
    (root, env, extra = []) => run(["bun", "packages/consumer/bin/verify.ts", "--root", root, ...extra], { env }),
  ],
  [
    "replay",
    (root, env, extra = []) =>
      run(["bun", "scripts/replay.ts", "--root", root, "evt-broken-0001.json", ...extra], { env }),
  ],
  [
    "replay --all",
    (root, env, extra = []) => run(["bun", "scripts/replay.ts", "--root", root, "--all", ...extra], { env }),
  ],
]

describe("a root bound to its SQLite ledger", () => {
  it("is bound by its first consume, and refuses a PostgreSQL URL without touching that database", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    expect(binding(q.root)).toEqual({ backend: "sqlite" })
    const r = await spool("consume", ["--root", q.root, "--ledger", "postgres://nobody@127.0.0.1:1/none"])
    expect(r.stderr).toContain(`is bound to its SQLite ledger ${join(q.root, "ledger.db")}`)
    expect(r.stderr).toContain("unset SPOOL_LEDGER_URL")
    expect(r.exitCode).toBe(2)
    expect(fs.existsSync(join(q.root, ".spool-root-id"))).toBe(false)
  })

  it("keeps working for a root from before the binding was recorded (a ledger.db), and records it", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    fs.rmSync(join(q.root, ".spool"), { recursive: true })
    fs.copyFileSync(join(q.root, "done", "evt-03bdf456.json"), join(q.root, "inbox", "again.json"))
    const r = await spool("consume", ["--root", q.root])
    expect(r.stderr).toContain("duplicates=1")
    expect(r.exitCode).toBe(0)
    expect(binding(q.root)).toEqual({ backend: "sqlite" })
  })

  it("refuses a createConsumer told to use PostgreSQL, whose handler runs on SQLite, creating nothing", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    const app = join(repoRoot, "test/apps/balances.ts")
    const r = await run(["bun", app, q.root], { env: { SPOOL_LEDGER_URL: "postgres://nobody@127.0.0.1:1/none" } })
    expect(r.stderr).toContain("SPOOL_LEDGER_URL names a PostgreSQL ledger")
    expect(r.stderr).toContain("build this consumer with createPostgresConsumer")
    expect(r.exitCode).not.toBe(0)
    expect(list(q.root)).not.toContain("ledger.db")
    expect(list(join(q.root, "inbox"))).toHaveLength(20)
  })

  it("refuses a PostgreSQL URL given to either consumer of the library, without touching that database", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    fs.copyFileSync(join(q.root, "done", "evt-03bdf456.json"), join(q.root, "inbox", "redelivered.json"))
    const url = "postgres://nobody@127.0.0.1:1/none"
    const sqliteApp = await run(["bun", join(repoRoot, "test/apps/balances.ts"), q.root], {
      env: { SPOOL_LEDGER_URL: url },
    })
    expect(sqliteApp.stderr).toContain("SPOOL_LEDGER_URL names a PostgreSQL ledger")
    expect(sqliteApp.exitCode).not.toBe(0)
    const postgresApp = await run(["bun", join(repoRoot, "test/apps/balances-postgres.ts"), q.root, url], {
      env: { SPOOL_LEDGER_URL: "" },
    })
    expect(postgresApp.stderr).toContain(`is bound to its SQLite ledger ${join(q.root, "ledger.db")}`)
    expect(postgresApp.exitCode).not.toBe(0)
    expect(fs.existsSync(join(q.root, ".spool-root-id"))).toBe(false)
    expect(binding(q.root)).toEqual({ backend: "sqlite" })
    expect(list(join(q.root, "inbox"))).toEqual(["redelivered.json"])
  })
})

pg("a root bound to a PostgreSQL ledger", () => {
  /** A root consumed into a fresh database, with a redelivery of a processed message waiting in inbox/. */
  async function boundRoot() {
    const db = await tempDatabase()
    const q = await tempQueue({ seed: "fixtures" })
    expect((await spool("consume", ["--root", q.root, "--ledger", db.url])).exitCode).toBe(0)
    fs.copyFileSync(join(q.root, "done", "evt-03bdf456.json"), join(q.root, "inbox", "redelivered.json"))
    return {
      db,
      q,
      async [Symbol.asyncDispose]() {
        await q[Symbol.asyncDispose]()
        await db[Symbol.asyncDispose]()
      },
    }
  }

  it("records the ledger's identity, never a password", async () => {
    await using t = await boundRoot()
    const b = binding(t.q.root)
    expect(b.backend).toBe("postgres")
    expect(b.ledger_id).toMatch(/^[0-9a-f-]{36}$/)
    expect(b.where).toBe(t.db.url)
  })

  for (const [name, command] of commands)
    it(`${name} without its URL refuses with exit 2, naming the variable, and creates nothing`, async () => {
      await using t = await boundRoot()
      const r = await command(t.q.root, { SPOOL_LEDGER_URL: "" })
      expect(r.stdout).toBe("")
      expect(r.stderr).toContain("set SPOOL_LEDGER_URL or pass --ledger")
      expect(r.exitCode).toBe(2)
      expect(list(t.q.root)).not.toContain("ledger.db")
      // The redelivery was not processed as new, nor anything moved.
      expect(list(join(t.q.root, "inbox"))).toEqual(["redelivered.json"])
      expect(list(join(t.q.root, "error"))).toEqual(["evt-broken-0001.json", "evt-noorder-0002.json"])
      // With its URL the same root goes on as before: the redelivery is a duplicate.
      const ok = await spool("consume", ["--root", t.q.root], { SPOOL_LEDGER_URL: t.db.url })
      expect(ok.stderr).toContain("processed=0 duplicates=1")
      expect(ok.exitCode).toBe(0)
    })

  it("refuses a URL that names another database, leaving that database untouched", async () => {
    await using t = await boundRoot()
    await using other = await tempDatabase()
    for (const [name, command] of commands) {
      const r = await command(t.q.root, { SPOOL_LEDGER_URL: other.url })
      expect([name, r.stderr]).toEqual([name, expect.stringContaining("names a database with no spool ledger")])
      expect([name, r.exitCode]).toEqual([name, 2])
    }
    expect(await spoolTables(other.url)).toEqual([])
    // Another spool ledger is refused the same way, by its identity.
    await using q2 = await tempQueue({ seed: "fixtures" })
    expect((await spool("consume", ["--root", q2.root, "--ledger", other.url])).exitCode).toBe(0)
    const r = await spool("consume", ["--root", t.q.root, "--ledger", other.url])
    expect(r.stderr).toContain(`names another ledger (ledger id ${binding(q2.root).ledger_id})`)
    expect(r.exitCode).toBe(2)
    expect(list(join(t.q.root, "inbox"))).toEqual(["redelivered.json"])
  })

  it("keeps working for a root from before the binding was recorded (.spool-root-id, no ledger.db)", async () => {
    await using t = await boundRoot()
    fs.rmSync(join(t.q.root, ".spool"), { recursive: true })
    const refused = await spool("consume", ["--root", t.q.root])
    expect(refused.stderr).toContain("set SPOOL_LEDGER_URL or pass --ledger")
    expect(refused.exitCode).toBe(2)
    expect(list(t.q.root)).not.toContain("ledger.db")
    const ok = await spool("consume", ["--root", t.q.root, "--ledger", t.db.url])
    expect(ok.stderr).toContain("processed=0 duplicates=1")
    expect(binding(t.q.root).ledger_id).toMatch(/^[0-9a-f-]{36}$/)
  })

  it("is consumed by createPostgresConsumer with its URL, and refused to createConsumer, whose handler runs on SQLite", async () => {
    await using t = await boundRoot()
    const sqliteApp = await run(["bun", join(repoRoot, "test/apps/balances.ts"), t.q.root], {
      env: { SPOOL_LEDGER_URL: "" },
    })
    expect(sqliteApp.stderr).toContain("is bound to a PostgreSQL ledger")
    expect(sqliteApp.stderr).toContain("build this consumer with createPostgresConsumer")
    expect(sqliteApp.exitCode).not.toBe(0)
    expect(list(t.q.root)).not.toContain("ledger.db")
    expect(list(join(t.q.root, "inbox"))).toEqual(["redelivered.json"])
    // Without its URL, the PostgreSQL consumer is refused as the commands are.
    const noUrl = await run(["bun", join(repoRoot, "test/apps/balances-postgres.ts"), t.q.root], {
      env: { SPOOL_LEDGER_URL: "" },
    })
    expect(noUrl.stderr).toContain("pass ledger")
    expect(noUrl.exitCode).not.toBe(0)
    expect(list(join(t.q.root, "inbox"))).toEqual(["redelivered.json"])
    // With it, the redelivery of a message the consume command processed is a duplicate.
    const before = binding(t.q.root)
    const ok = await run(["bun", join(repoRoot, "test/apps/balances-postgres.ts"), t.q.root, t.db.url], {
      env: { SPOOL_LEDGER_URL: "" },
    })
    expect(ok.stderr).toBe("")
    expect(JSON.parse(ok.stdout)).toMatchObject({ processed: 0, duplicates: 1 })
    expect(ok.exitCode).toBe(0)
    expect(list(t.q.root)).not.toContain("ledger.db")
    expect(binding(t.q.root)).toEqual(before)
    // Another database is refused by the ledger's identity, untouched.
    await using other = await tempDatabase()
    const wrong = await run(["bun", join(repoRoot, "test/apps/balances-postgres.ts"), t.q.root, other.url], {
      env: { SPOOL_LEDGER_URL: "" },
    })
    expect(wrong.stderr).toContain("names a database with no spool ledger")
    expect(wrong.exitCode).not.toBe(0)
    expect(await spoolTables(other.url)).toEqual([])
  })

  it("is bound from the start by setup --ledger, and moved only by setup --rebind", async () => {
    await using a = await tempDatabase()
    await using b = await tempDatabase()
    await using q = await tempQueue()
    expect((await spool("setup", ["--root", q.root, "--ledger", a.url])).exitCode).toBe(0)
    expect(binding(q.root)).toMatchObject({ backend: "postgres", where: a.url })
    // Bound before any consume: even its first run without the URL is refused.
    expect((await spool("consume", ["--root", q.root], { SPOOL_LEDGER_URL: "" })).exitCode).toBe(2)
    expect((await spool("consume", ["--root", q.root, "--ledger", a.url])).exitCode).toBe(0)
    // setup --ledger with another URL does not move it; --rebind does, and says so.
    expect((await spool("setup", ["--root", q.root, "--ledger", b.url])).exitCode).toBe(2)
    const moved = await spool("setup", ["--root", q.root, "--ledger", b.url, "--rebind"])
    expect(moved.stderr).toContain(`is now bound to ${b.url} (it was bound to ${a.url})`)
    expect(moved.exitCode).toBe(0)
    expect((await spool("consume", ["--root", q.root, "--ledger", b.url])).exitCode).toBe(0)
    expect((await spool("consume", ["--root", q.root, "--ledger", a.url])).exitCode).toBe(2)
  })
})

describe("a root rebound to a SQLite ledger that does not exist", () => {
  it("asks its first consume for --new-ledger, the word that starting without the old keys is meant", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    for (const f of fs.readdirSync(q.root)) if (f.startsWith("ledger.db")) fs.rmSync(join(q.root, f))
    expect((await spool("setup", ["--root", q.root, "--rebind"])).exitCode).toBe(0)
    const done = fs.readdirSync(join(q.root, "done")).sort()
    fs.copyFileSync(join(q.root, "done", done[0] as string), join(q.root, "inbox", "again.json"))
    const refused = await spool("consume", ["--root", q.root])
    expect(refused.stderr).toContain("refusing to start a new ledger")
    expect(refused.exitCode).toBe(2)
    expect(fs.readdirSync(join(q.root, "inbox"))).toEqual(["again.json"])
    expect((await spool("consume", ["--root", q.root, "--new-ledger"])).exitCode).toBe(0)
    // Rebound to the ledger it is bound to already: said so.
    const again = await spool("setup", ["--root", q.root, "--rebind"])
    expect(again.stderr).toBe(
      `setup: ${q.root} is bound to ${join(q.root, "ledger.db")} already; nothing changed\nsetup: queue ready at ${q.root}\n`,
    )
    expect(again.exitCode).toBe(0)
  })
})

describe("a root's first ledger", () => {
  it("is not given by a PostgreSQL URL that fails: the root is left as it was, for any ledger", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    for (const url of ["postgres://postgres@127.0.0.1:1/none", "postgres://postgres@127.0.0.1:5432/spool_no_such_db"]) {
      const r = await spool("consume", ["--root", q.root, "--ledger", url])
      expect([url, r.exitCode]).toEqual([url, 3])
      expect(fs.readdirSync(q.root).filter((f) => f.startsWith("."))).toEqual([])
    }
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    expect(binding(q.root)).toEqual({ backend: "sqlite" })
  })

  ;(pgSkip ? it.skip : it)(
    "goes to one of two first consumes that chose different ledgers at once; the other refuses before consuming",
    async () => {
      await using db = await tempDatabase()
      await using q = await tempQueue({ seed: "fixtures" })
      // The PostgreSQL consume found no binding, and is stopped before it creates anything...
      const late = Bun.spawn(
        ["bun", join(repoRoot, "packages/consumer/bin/consume.ts"), "--root", q.root, "--ledger", db.url],
        {
          env: { ...process.env, SPOOL_FAULT: "after-binding-check", SPOOL_FAULT_SIGNAL: "SIGSTOP" },
          stdout: "pipe",
          stderr: "pipe",
        },
      )
      try {
        for (const deadline = Date.now() + 30_000; !isStopped(late.pid); await Bun.sleep(10))
          if (late.exitCode !== null || Date.now() > deadline) throw new Error("the consume never stopped")
        // ...while a consume on SQLite gives the root its ledger and drains it.
        expect((await spool("consume", ["--root", q.root], { SPOOL_LEDGER_URL: "" })).exitCode).toBe(0)
        fs.copyFileSync(join(q.root, "done", "evt-03bdf456.json"), join(q.root, "inbox", "again.json"))
        late.kill("SIGCONT")
        const [stderr, code] = await Promise.all([new Response(late.stderr).text(), late.exited])
        expect(stderr).toContain(`is bound to its SQLite ledger ${join(q.root, "ledger.db")}`)
        expect(code).toBe(2)
      } finally {
        late.kill("SIGCONT")
        late.kill("SIGKILL")
      }
      expect(binding(q.root)).toEqual({ backend: "sqlite" })
      // The redelivery waits for the root's own ledger, which knows it.
      expect(list(join(q.root, "inbox"))).toEqual(["again.json"])
      const again = await spool("consume", ["--root", q.root], { SPOOL_LEDGER_URL: "" })
      expect(again.stderr).toContain("processed=0 duplicates=1")
    },
    60_000,
  )
})
