// A consumer that was alive but looked dead: its claims were taken over by another consumer
// while it held them (another host's view after a silence longer than the lease: a stalled
// NFS mount, a SIGSTOP, a VM paused). When it resumes, its commit must apply nothing the
// other consumer owns now and move nothing: the claims are fenced by their owner.
//
// The stall is made real: consumer A runs in this process, and its message type's predicate,
// which runs between the claim and the commit, blocks this thread while it rewrites A's
// consumers row to look like a silent owner on another host and runs consumer B as a real
// process to completion. Then A goes on.
import { Database } from "bun:sqlite"
import { afterAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { Message } from "@spool/core"
import {
  type AcceptedOutcome,
  consume,
  type LedgerPort,
  openLedger,
  openPostgresLedger,
  openQueue,
} from "@spool/core/engine"
import { list, pgUnavailable, repoRoot, requireTool, type ToolTest, tempDatabase, tempQueue } from "@spool/test-support"
import { SQL } from "bun"

const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)

const consumeBin = join(repoRoot, "packages/consumer/bin/consume.ts")

/** What A's stall does, synchronously, the first time A judges a message. */
function stallOnce(step: () => void) {
  let stalled = false
  return Message.narrow(() => {
    if (!stalled) {
      stalled = true
      step()
    }
    return true
  })
}

function runSync(cmd: string[]) {
  const r = Bun.spawnSync(cmd, {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: "1" },
    stderr: "pipe",
    stdout: "pipe",
  })
  if (r.exitCode !== 0) throw new Error(`${cmd.join(" ")} exited ${r.exitCode}: ${r.stderr.toString()}`)
  return r.stdout.toString() + r.stderr.toString()
}

/**
 * Makes every consumer of process `pid` look like a silent consumer on another host, through
 * the ledger's own client (sqlite3 or psql) as another process would.
 */
function silence(pid: number, ledgerPath: string, url: string | undefined): void {
  const sql = `UPDATE consumers SET host = 'elsewhere.example', heartbeat_at = '2000-01-01T00:00:00.000Z' WHERE pid = ${pid}`
  if (url === undefined) runSync(["sqlite3", ledgerPath, sql])
  else runSync(["psql", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
}

// The tests that silence a consumer through the ledger's own client need that client installed.
const backends: { name: string; skip: string | undefined; itWithClient: ToolTest }[] = [
  { name: "sqlite", skip: undefined, itWithClient: requireTool("sqlite3", "apt-get install sqlite3") },
  { name: "postgres", skip: pgSkip, itWithClient: requireTool("psql", "apt-get install postgresql-client") },
]

for (const backend of backends) {
  const suite = backend.skip ? describe.skip : describe
  suite(`a consumer whose claims were taken over while it stalled (${backend.name})`, () => {
    const cleanups: (() => Promise<void>)[] = []
    afterAll(async () => {
      for (const c of cleanups) await c()
    })

    for (const pipeline of [false, true]) {
      const label = `commits and moves none of them, and the other consumer's work stands (${pipeline ? "pipelined" : "one thread"})`
      backend.itWithClient(label, async () => {
        await using q = await tempQueue()
        let url: string | undefined
        if (backend.name === "postgres") {
          const db = await tempDatabase()
          cleanups.push(async () => await db[Symbol.asyncDispose]())
          url = db.url
        }
        const names: string[] = []
        for (let i = 0; i < 6; i++) {
          const name = `m-${i}.json`
          names.push(name)
          q.put(name, { msg_id: `id-${i}`, order_no: "O-1", seq: i + 1, amount: 1.25 })
        }
        const queue = openQueue(q.root)
        const ledger: LedgerPort = await openLedger(queue, url === undefined ? {} : { url })
        const warnings: string[] = []
        const log = {
          debug() {},
          info() {},
          warn(event: string, fields: Record<string, unknown>) {
            warnings.push(`${event} ${String(fields.file)}`)
          },
          error() {},
        }
        let bOutput = ""
        const summary = await consume({
          queue,
          ledger,
          batchSize: pipeline ? 2 : 100,
          pipeline,
          log: log as never,
          type: stallOnce(() => {
            silence(process.pid, queue.ledger, url)
            bOutput = runSync([
              "bun",
              consumeBin,
              "--root",
              q.root,
              "--log-format",
              "json",
              ...(url ? ["--ledger", url] : []),
            ])
          }),
        })
        await ledger.close()

        // B took over what A held and finished everything; A applied and moved nothing B owned.
        expect(bOutput).toContain('"msg":"recovered"')
        expect(list(join(q.root, "done"))).toEqual(names)
        expect(list(join(q.root, "processing"))).toEqual([])
        expect(list(join(q.root, "inbox"))).toEqual([])
        expect(list(join(q.root, "error"))).toEqual([])
        expect(summary.lost).toBeGreaterThan(0)
        expect(summary.processed + summary.lost).toBe(summary.claimed)
        expect(summary.duplicates).toBe(0)
        expect(warnings.filter((w) => w.startsWith("lost-claim")).length).toBe(summary.lost)

        // Each message applied once, and no delivery recorded as a duplicate of itself.
        const rows = await ledgerRows(q.root, url)
        expect(rows.processed).toEqual(names.map((_, i) => `id-${i}`))
        expect(rows.duplicates).toBe(0)
        expect(rows.claims).toBe(0)
      })
    }
  })
}

// The same silence between the commit and the move: A stops itself right after its first
// commit (SPOOL_FAULT_SIGNAL=SIGSTOP), B takes the committed claims over and moves their files
// itself, and then A is resumed and finds them gone from processing/.
for (const backend of backends) {
  const suite = backend.skip ? describe.skip : describe
  suite(`a consumer stalled between its commit and its move (${backend.name})`, () => {
    for (const pipeline of [false, true]) {
      const label = `leaves the moves to the consumer that took its claims over and exits 0 (${pipeline ? "pipelined" : "one thread"})`
      backend.itWithClient(label, async () => {
        await using q = await tempQueue()
        await using db = backend.name === "postgres" ? await tempDatabase() : undefined
        const url = db?.url
        const names = Array.from({ length: 6 }, (_, i) => `m-${i}.json`)
        for (const [i, name] of names.entries())
          q.put(name, { msg_id: `id-${i}`, order_no: "O-1", seq: i + 1, amount: 1.25 })
        const ledgerArgs = url ? ["--ledger", url] : []
        const a = await stoppedAfterCommit(q.root, pipeline, ledgerArgs)
        try {
          silence(a.pid, join(q.root, "ledger.db"), url)
          const bOutput = runSync(["bun", consumeBin, "--root", q.root, "--log-format", "json", ...ledgerArgs])
          expect(bOutput).toContain('"step":"committed, not yet moved"')
        } finally {
          a.kill("SIGCONT")
        }
        const [code, aErr] = await Promise.all([a.exited, new Response(a.stderr).text()])
        expect({ code, aErr }).toMatchObject({ code: 0 })
        expect(aErr).toContain('"msg":"moved-by-other"')

        expect(list(join(q.root, "done"))).toEqual(names)
        expect(list(join(q.root, "processing"))).toEqual([])
        expect(list(join(q.root, "inbox"))).toEqual([])
        expect(list(join(q.root, "error"))).toEqual([])
        const rows = await ledgerRows(q.root, url)
        expect(rows.processed).toEqual(names.map((_, i) => `id-${i}`))
        expect(rows.duplicates).toBe(0)
        expect(rows.claims).toBe(0)
      })

      it(`still fails with exit 3 when its claim is its own and the file was removed from outside (${pipeline ? "pipelined" : "one thread"})`, async () => {
        await using q = await tempQueue()
        await using db = backend.name === "postgres" ? await tempDatabase() : undefined
        for (let i = 0; i < 6; i++) q.put(`m-${i}.json`, { msg_id: `id-${i}`, order_no: "O-1", seq: i + 1, amount: 1 })
        const a = await stoppedAfterCommit(q.root, pipeline, db ? ["--ledger", db.url] : [])
        const inProcessing = list(join(q.root, "processing"))
        try {
          expect(inProcessing.length).toBeGreaterThan(0)
          for (const name of inProcessing) fs.rmSync(join(q.root, "processing", name))
        } finally {
          a.kill("SIGCONT")
        }
        const [code, aErr] = await Promise.all([a.exited, new Response(a.stderr).text()])
        expect(code).toBe(3)
        expect(aErr).toContain("something outside spool removed it")
        expect(aErr).not.toContain("moved-by-other")
      })
    }
  })
}

/** Starts consume on `root`, batches of 2, and waits until it has stopped itself after its first commit. */
async function stoppedAfterCommit(root: string, pipeline: boolean, extraArgs: readonly string[]) {
  const a = Bun.spawn(
    [
      "bun",
      consumeBin,
      "--root",
      root,
      "--batch-size",
      "2",
      "--log-format",
      "json",
      ...(pipeline ? [] : ["--one-thread"]),
      ...extraArgs,
    ],
    {
      cwd: repoRoot,
      env: { ...process.env, NO_COLOR: "1", SPOOL_FAULT: "after-commit", SPOOL_FAULT_SIGNAL: "SIGSTOP" },
      stdout: "pipe",
      stderr: "pipe",
    },
  )
  for (const deadline = Date.now() + 60_000; !isStopped(a.pid); await Bun.sleep(10))
    if (a.exitCode !== null || Date.now() > deadline) {
      a.kill("SIGKILL")
      throw new Error(`consume never stopped after its commit: ${await new Response(a.stderr).text()}`)
    }
  return a
}

/** True once the process is stopped (state T in /proc/PID/stat). */
function isStopped(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "T"
  } catch {
    return false
  }
}

const pgSuite = pgSkip ? describe.skip : describe
pgSuite("the heartbeat while a batch is in hand (postgres)", () => {
  it("is refreshed during a long effect, so other hosts do not take the batch over", async () => {
    await using q = await tempQueue()
    await using db = await tempDatabase()
    for (let i = 0; i < 3; i++) q.put(`m-${i}.json`, { msg_id: `id-${i}`, order_no: "O-1", seq: i + 1, amount: 1 })
    const queue = openQueue(q.root)
    const ledger = await openPostgresLedger(queue, { url: db.url })
    const watcher = new SQL({ url: db.url, max: 1 })
    const heartbeat = async () => {
      const [row] = await watcher`SELECT heartbeat_at FROM consumers`
      return Date.parse(row.heartbeat_at as string)
    }
    const seen: number[] = []
    try {
      const summary = await consume({
        queue,
        ledger,
        leaseMs: 200,
        // The first message's effect takes 1.2 s, six leases: without a heartbeat meanwhile,
        // another host would judge this consumer dead and take its claims.
        effect: async (o: AcceptedOutcome) => {
          if (o.msgId !== "id-0") return
          for (let t = 0; t < 6; t++) {
            await Bun.sleep(200)
            seen.push(await heartbeat())
          }
        },
      })
      expect(summary.processed).toBe(3)
      expect(summary.lost).toBe(0)
    } finally {
      await watcher.close()
      await ledger.close()
    }
    // Refreshed during the effect, not only at the claim before it.
    expect(new Set(seen).size).toBeGreaterThanOrEqual(4)
    for (let i = 1; i < seen.length; i++) expect(seen[i] as number).toBeGreaterThanOrEqual(seen[i - 1] as number)
  })
})

async function ledgerRows(root: string, url: string | undefined) {
  if (url === undefined) {
    const db = new Database(join(root, "ledger.db"), { readonly: true })
    try {
      return {
        processed: (db.query("SELECT msg_id FROM processed ORDER BY msg_id").all() as { msg_id: string }[]).map(
          (r) => r.msg_id,
        ),
        duplicates: (db.query("SELECT COUNT(*) AS n FROM duplicates").get() as { n: number }).n,
        claims: (db.query("SELECT COUNT(*) AS n FROM claims").get() as { n: number }).n,
      }
    } finally {
      db.close()
    }
  }
  const sql = new SQL({ url, max: 1 })
  try {
    const id = fs.readFileSync(join(root, ".spool-root-id"), "utf8").trim()
    const processed = (await sql`SELECT msg_id FROM processed WHERE root_id = ${id} ORDER BY msg_id`) as {
      msg_id: string
    }[]
    const [d] = await sql`SELECT COUNT(*)::int AS n FROM duplicates WHERE root_id = ${id}`
    const [c] = await sql`SELECT COUNT(*)::int AS n FROM claims WHERE root_id = ${id}`
    return { processed: processed.map((r) => r.msg_id), duplicates: d.n as number, claims: c.n as number }
  } finally {
    await sql.close()
  }
}
