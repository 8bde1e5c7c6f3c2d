// Transient failures end to end, on both ledgers: a handler that throws TransientError sends its
// message to deferred/ with a deferrals row; the message is picked up when due, processed once,
// and given up (error/, `expired`) past the maximum age; a kill at each new step ends as an
// uninterrupted run. The app is test/apps/transient.ts, as a real process.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { consumeBin, list, pgUnavailable, type RunResult, run, tempDatabase, tempQueue } from "@spool/test-support"
import { SQL } from "bun"

const app = join(import.meta.dir, "apps", "transient.ts")
const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)

const message = (i: number) => ({ msg_id: `m-${i}`, order_no: "O", seq: i, amount: i })
const seed = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f-${i + 1}.json`, message(i + 1)]))

interface Setup extends AsyncDisposable {
  readonly root: string
  /** The PostgreSQL ledger's URL; undefined for the SQLite ledger in the root. */
  readonly url: string | undefined
  /** Marks downstream down (transient failures) or up. */
  down(isDown: boolean): void
  app(env?: Record<string, string>): Promise<RunResult & { signalCode: unknown }>
  rows(query: string): Promise<Record<string, unknown>[]>
  /** Runs one statement on the ledger, as an operator would. */
  exec(statement: string): Promise<void>
}

async function open(backend: "sqlite" | "postgres", files: Record<string, object>): Promise<Setup> {
  const q = await tempQueue({ seed: files })
  const db = backend === "postgres" ? await tempDatabase() : undefined
  const downFile = join(q.root, "..", `down-${crypto.randomUUID()}`)
  return {
    root: q.root,
    url: db?.url,
    down(isDown) {
      if (isDown) fs.writeFileSync(downFile, "")
      else fs.rmSync(downFile, { force: true })
    },
    async app(env = {}) {
      const proc = Bun.spawn(["bun", app, q.root], {
        env: { ...process.env, NO_COLOR: "1", SPOOL_LEDGER_URL: db?.url ?? "", DOWN: downFile, ...env },
        stdout: "pipe",
        stderr: "pipe",
        stdin: "ignore",
      })
      const [stdout, stderr, exitCode] = await Promise.all([
        new Response(proc.stdout).text(),
        new Response(proc.stderr).text(),
        proc.exited,
      ])
      return { stdout, stderr, exitCode, signalCode: proc.signalCode }
    },
    async rows(query) {
      if (db === undefined) {
        const d = new Database(join(q.root, "ledger.db"), { readonly: true })
        try {
          return d.query(query).all() as Record<string, unknown>[]
        } finally {
          d.close()
        }
      }
      const sql = new SQL({ url: db.url, max: 1 })
      try {
        return [...(await sql.unsafe(query))]
      } finally {
        await sql.close()
      }
    },
    async exec(statement) {
      if (db === undefined) {
        const d = new Database(join(q.root, "ledger.db"))
        try {
          d.run(statement)
        } finally {
          d.close()
        }
        return
      }
      const sql = new SQL({ url: db.url, max: 1 })
      try {
        await sql.unsafe(statement)
      } finally {
        await sql.close()
      }
    },
    async [Symbol.asyncDispose]() {
      fs.rmSync(downFile, { force: true })
      await q[Symbol.asyncDispose]()
      await db?.[Symbol.asyncDispose]()
    },
  }
}

const fast = { DEFER_FIRST_MS: "200", DEFER_MAX_MS: "400", DEFER_MAX_AGE_MS: "60000" }
const deferrals = (s: Setup) =>
  s.rows("SELECT file, msg_id, CAST(attempts AS INTEGER) AS attempts FROM deferrals ORDER BY file")
const applied = async (s: Setup) => (await s.rows("SELECT msg_id FROM applied ORDER BY msg_id")).map((r) => r.msg_id)
const summaryOf = (r: RunResult) => JSON.parse(r.stdout) as Record<string, number>
const dirs = (s: Setup) => ({
  inbox: list(join(s.root, "inbox")),
  processing: list(join(s.root, "processing")),
  deferred: list(join(s.root, "deferred")),
  done: list(join(s.root, "done")),
  error: list(join(s.root, "error")),
})

/** Runs the app until `done` says so, at most `n` times, `gapMs` apart. */
/** What lag (--json) and stats (--json) count of deferred files. */
async function counted(s: Setup, clock: Record<string, string> = {}) {
  const ledger = s.url === undefined ? [] : ["--ledger", s.url]
  const env = { SPOOL_LEDGER_URL: "", ...clock }
  const lag = await run(["bun", "scripts/lag.ts", s.root, "100", "--json"], { env })
  const stats = await run(["bun", "run", "--silent", "stats", "--root", s.root, ...ledger, "--json"], { env })
  expect(stats.exitCode).toBe(0)
  return { lag: JSON.parse(lag.stdout).deferred, deferrals: JSON.parse(stats.stdout).deferrals }
}

async function runUntil(s: Setup, env: Record<string, string>, done: () => boolean, n = 40, gapMs = 100) {
  for (let i = 0; i < n && !done(); i++) {
    const r = await s.app(env)
    expect(r.exitCode).toBe(0)
    await Bun.sleep(gapMs)
  }
}

// Each case has its own queue, ledger and downstream switch, and waits mostly on the app's
// runs and on deferrals falling due: they run side by side.
for (const backend of ["sqlite", "postgres"] as const)
  (backend === "postgres" && pgSkip ? describe.skip : describe.concurrent)(`transient failures on ${backend}`, () => {
    it("defers a transient failure to deferred/, leaves it until due, then processes it once", async () => {
      await using s = await open(backend, seed(3))
      s.down(true)
      // Due in an hour: the second run comes long before that however slow the machine, and the
      // third runs with this host's clock read two hours on (SPOOL_CLOCK_OFFSET), when all are due.
      const env = { ...fast, DEFER_FIRST_MS: "3600000", DEFER_MAX_MS: "3600000" }
      const later = { ...env, SPOOL_CLOCK_OFFSET: "+2h" }
      const first = await s.app(env)
      expect(first.exitCode).toBe(0)
      expect(summaryOf(first)).toMatchObject({ deferred: 3, processed: 0, rejected: 0 })
      expect(dirs(s)).toEqual({
        inbox: [],
        processing: [],
        deferred: ["f-1.json", "f-2.json", "f-3.json"],
        done: [],
        error: [],
      })
      expect(await deferrals(s)).toEqual([
        { file: "f-1.json", msg_id: "m-1", attempts: 1 },
        { file: "f-2.json", msg_id: "m-2", attempts: 1 },
        { file: "f-3.json", msg_id: "m-3", attempts: 1 },
      ])
      s.down(false)
      // Not due yet: left alone.
      const early = await s.app(env)
      expect(summaryOf(early)).toMatchObject({ claimed: 0, processed: 0 })
      expect(dirs(s).deferred).toHaveLength(3)
      // lag counts deferred/; stats asks the ledger which are due.
      expect(await counted(s)).toEqual({ lag: 3, deferrals: { deferred: 3, due: 0 } })
      expect(await counted(s, { SPOOL_CLOCK_OFFSET: "+2h" })).toEqual({ lag: 3, deferrals: { deferred: 3, due: 3 } })
      const due = await s.app(later)
      expect(summaryOf(due)).toMatchObject({ claimed: 3, processed: 3, deferred: 0 })
      expect(dirs(s)).toEqual({
        inbox: [],
        processing: [],
        deferred: [],
        done: ["f-1.json", "f-2.json", "f-3.json"],
        error: [],
      })
      expect(await deferrals(s)).toEqual([])
      expect(await applied(s)).toEqual(["m-1", "m-2", "m-3"])
      expect(await s.rows("SELECT CAST(count(*) AS INTEGER) AS n FROM processed")).toEqual([{ n: 3 }])
    })

    it("counts the attempts across retries and keeps the first deferral time", async () => {
      await using s = await open(backend, seed(1))
      s.down(true)
      // Each retry an hour apart, a day's maximum age: each run reads this host's clock two hours
      // further on (SPOOL_CLOCK_OFFSET), so every run finds it due and none finds it expired,
      // however long the runs take.
      const hourly = { DEFER_FIRST_MS: "3600000", DEFER_MAX_MS: "3600000", DEFER_MAX_AGE_MS: "86400000" }
      await s.app(hourly)
      const [before] = await s.rows("SELECT first_deferred_at, next_attempt_at FROM deferrals")
      for (const hours of [2, 4, 6]) {
        const r = await s.app({ ...hourly, SPOOL_CLOCK_OFFSET: `+${hours}h` })
        expect(summaryOf(r)).toMatchObject({ claimed: 1, deferred: 1 })
      }
      const [after] = await s.rows(
        "SELECT CAST(attempts AS INTEGER) AS attempts, first_deferred_at, next_attempt_at, last_error FROM deferrals",
      )
      expect(after?.first_deferred_at).toBe(before?.first_deferred_at)
      expect(Number(after?.attempts)).toBe(4)
      expect(String(after?.next_attempt_at) > String(before?.next_attempt_at)).toBe(true)
      expect(after?.last_error).toBe("downstream unavailable for m-1")
      expect(dirs(s).deferred).toEqual(["f-1.json"])
    })

    it("sends a message still failing past the maximum age to error/ as expired, with the last error", async () => {
      await using s = await open(backend, seed(1))
      s.down(true)
      const env = { DEFER_FIRST_MS: "50", DEFER_MAX_MS: "100", DEFER_MAX_AGE_MS: "400" }
      await runUntil(s, env, () => list(join(s.root, "error")).length > 0)
      expect(dirs(s)).toEqual({ inbox: [], processing: [], deferred: [], done: [], error: ["f-1.json"] })
      const rows = await s.rows("SELECT file, reason, detail FROM failures")
      expect(rows).toHaveLength(1)
      expect(rows[0]).toMatchObject({ file: "f-1.json", reason: "expired" })
      expect(String(rows[0]?.detail)).toContain("downstream unavailable for m-1")
      expect(await deferrals(s)).toEqual([])
      expect(await applied(s)).toEqual([])
    })

    it("still sends a permanent failure to error/ as handler", async () => {
      await using s = await open(backend, seed(1))
      s.down(true)
      const r = await s.app({ ...fast, PERMANENT: "1" })
      expect(summaryOf(r)).toMatchObject({ rejected: 1, deferred: 0 })
      expect(dirs(s)).toEqual({ inbox: [], processing: [], deferred: [], done: [], error: ["f-1.json"] })
      expect(await s.rows("SELECT file, reason FROM failures")).toEqual([{ file: "f-1.json", reason: "handler" }])
      expect(await deferrals(s)).toEqual([])
    })

    // Each kill, then a restart, ends as the uninterrupted run: deferred once (or processed once).
    it.each(["after-commit", "after-move"])(
      "ends a deferral killed at %s as an uninterrupted run does",
      async (fault) => {
        await using s = await open(backend, seed(2))
        s.down(true)
        const slow = { DEFER_FIRST_MS: "60000", DEFER_MAX_MS: "60000" }
        const killed = await s.app({ ...slow, SPOOL_FAULT: fault })
        expect(killed.signalCode).toBe("SIGKILL")
        const again = await s.app(slow)
        expect(again.exitCode).toBe(0)
        expect(dirs(s)).toEqual({
          inbox: [],
          processing: [],
          deferred: ["f-1.json", "f-2.json"],
          done: [],
          error: [],
        })
        expect(await deferrals(s)).toEqual([
          { file: "f-1.json", msg_id: "m-1", attempts: 1 },
          { file: "f-2.json", msg_id: "m-2", attempts: 1 },
        ])
        expect(await s.rows("SELECT name FROM claims")).toEqual([])
      },
    )

    it.each(["after-pickup-claim", "after-pickup", "after-commit", "after-move"])(
      "ends a pickup of due files killed at %s as an uninterrupted run does",
      async (fault) => {
        await using s = await open(backend, seed(2))
        s.down(true)
        await s.app(fast)
        s.down(false)
        await Bun.sleep(250)
        const killed = await s.app({ ...fast, SPOOL_FAULT: fault })
        expect(killed.signalCode).toBe("SIGKILL")
        const again = await s.app(fast)
        expect(again.exitCode).toBe(0)
        expect(dirs(s)).toEqual({
          inbox: [],
          processing: [],
          deferred: [],
          done: ["f-1.json", "f-2.json"],
          error: [],
        })
        expect(await applied(s)).toEqual(["m-1", "m-2"])
        expect(await deferrals(s)).toEqual([])
        expect(await s.rows("SELECT msg_id FROM duplicates")).toEqual([])
        expect(await s.rows("SELECT name FROM claims")).toEqual([])
      },
    )

    // A power cut can keep a pickup's rename deferred/ -> processing/ (fsynced at once) and lose
    // its claim (which rides on the next commit): an orphan its deferrals row still names.
    it("returns to deferred/ a pickup whose claim was lost, under its own name and attempts", async () => {
      await using s = await open(backend, seed(2))
      s.down(true)
      const hourly = { ...fast, DEFER_FIRST_MS: "3600000", DEFER_MAX_MS: "3600000" }
      await s.app(hourly)
      fs.renameSync(join(s.root, "deferred", "f-1.json"), join(s.root, "processing", "f-1.json"))
      // Not the deferred file: another delivery of the same name, left in processing/ by hand.
      fs.renameSync(join(s.root, "deferred", "f-2.json"), join(s.root, "f-2.json"))
      fs.writeFileSync(join(s.root, "processing", "f-2.json"), JSON.stringify(message(9)))
      s.down(false)
      const r = await s.app(hourly)
      expect(r.exitCode).toBe(0)
      expect(dirs(s)).toEqual({ inbox: [], processing: [], deferred: ["f-1.json"], done: ["f-2.json"], error: [] })
      expect(await deferrals(s)).toEqual([
        { file: "f-1.json", msg_id: "m-1", attempts: 1 },
        { file: "f-2.json", msg_id: "m-2", attempts: 1 },
      ])
      expect(await applied(s)).toEqual(["m-9"])
      await s.exec("UPDATE deferrals SET next_attempt_at = '2000-01-01T00:00:00.000Z'")
      expect((await s.app(hourly)).exitCode).toBe(0)
      expect(dirs(s)).toMatchObject({ processing: [], deferred: [], done: ["f-1.json", "f-2.json"] })
      expect(await applied(s)).toEqual(["m-1", "m-9"])
      expect(await deferrals(s)).toEqual([])
      expect(await s.rows("SELECT name FROM claims")).toEqual([])
    })

    it("defers again a picked-up file killed after the pickup while downstream is still down", async () => {
      await using s = await open(backend, seed(1))
      s.down(true)
      // Deferred for an hour and made due in the ledger: the second deferral cannot fall due
      // during the run that makes it, however slow the machine.
      const env = { ...fast, DEFER_FIRST_MS: "3600000", DEFER_MAX_MS: "3600000" }
      await s.app(env)
      await s.exec("UPDATE deferrals SET next_attempt_at = '2000-01-01T00:00:00.000Z'")
      expect((await s.app({ ...env, SPOOL_FAULT: "after-pickup" })).signalCode).toBe("SIGKILL")
      expect(dirs(s).processing).toEqual(["f-1.json"])
      const again = await s.app(env)
      expect(again.exitCode).toBe(0)
      expect(dirs(s)).toEqual({ inbox: [], processing: [], deferred: ["f-1.json"], done: [], error: [] })
      expect(await deferrals(s)).toEqual([{ file: "f-1.json", msg_id: "m-1", attempts: 2 }])
    })
  })

describe("consume and deferred files", () => {
  it("picks up a deferred file in watch mode when it falls due, with no event and no rescan", async () => {
    await using s = await open("sqlite", seed(1))
    s.down(true)
    expect((await s.app({ DEFER_FIRST_MS: "1500", DEFER_MAX_MS: "1500" })).exitCode).toBe(0)
    expect(dirs(s).deferred).toEqual(["f-1.json"])
    const proc = Bun.spawn(["bun", consumeBin, "--root", s.root, "--watch", "--rescan", "1h"], {
      env: { ...process.env, NO_COLOR: "1", SPOOL_LEDGER_URL: "" },
      stdin: "ignore",
      stdout: "ignore",
      stderr: "ignore",
    })
    try {
      const deadline = Date.now() + 10_000
      while (list(join(s.root, "done")).length === 0 && Date.now() < deadline) await Bun.sleep(50)
      expect(dirs(s)).toEqual({ inbox: [], processing: [], deferred: [], done: ["f-1.json"], error: [] })
      expect(await deferrals(s)).toEqual([])
    } finally {
      proc.kill("SIGTERM")
      expect(await proc.exited).toBe(0)
    }
  })

  it("takes --defer-first, --defer-max and --defer-max-age with units, defaulting to 5m, 1h and 5d", async () => {
    const r = await run(["bun", consumeBin, "--help"])
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toMatch(/--defer-first\b.*\n?.*5m/)
    expect(r.stdout).toMatch(/--defer-max\b.*\n?.*1h/)
    expect(r.stdout).toMatch(/--defer-max-age\b.*\n?.*5d/)
    await using q = await tempQueue()
    const bad = await run(["bun", consumeBin, "--root", q.root, "--defer-first", "300"])
    expect(bad.stderr).toContain("--defer-first takes a duration with a unit")
    expect(bad.exitCode).toBe(2)
  })
})
