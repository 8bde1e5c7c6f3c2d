// The PostgreSQL ledger's own faults, end to end: a lock another session holds past
// --busy-timeout, a statement the server's statement_timeout cancels, and sessions ended by
// pg_terminate_backend at several steps of a run. Each must end the run with exit 3 and a
// message that says what happened and that nothing is lost, leave every file in inbox/,
// processing/ (with its claim) or done/ (with its row), and let a rerun finish cleanly.
import { describe, expect, it } from "bun:test"
import { join } from "node:path"
import { createPostgresConsumer, SpoolError } from "@spool/core"
import { isStopped, list, pgUnavailable, startConsume, tempDatabase, tempQueue } from "@spool/test-support"
import { SQL } from "bun"

const skip = await pgUnavailable()
if (skip) console.warn(skip)
const pg = skip ? describe.skip : describe

const n = 12
const names = Array.from({ length: n }, (_, i) => `m-${i}.json`).sort()
const ids = Array.from({ length: n }, (_, i) => `m-${i}`).sort()
const msg = (i: number) => ({ msg_id: `m-${i}`, order_no: `o-${i % 3}`, seq: Math.floor(i / 3) + 1, amount: i })
const slow = 120_000

/** A queue bound to a fresh database whose schema exists (one empty run), then `n` files in inbox/. */
async function boundQueue() {
  const db = await tempDatabase()
  const q = await tempQueue()
  expect((await consume(q.root, db.url)).exitCode).toBe(0)
  for (let i = 0; i < n; i++) q.put(`m-${i}.json`, msg(i))
  const sql = new SQL({ url: db.url, max: 2 })
  return {
    root: q.root,
    url: db.url,
    name: new URL(db.url).pathname.slice(1),
    sql,
    async [Symbol.asyncDispose]() {
      await sql.close()
      await q[Symbol.asyncDispose]()
      await db[Symbol.asyncDispose]()
    },
  }
}

function consume(root: string, url: string, args: readonly string[] = [], env: Record<string, string> = {}) {
  return startConsume(root, ["--ledger", url, ...args], { SPOOL_LEDGER_URL: "", ...env }).finished
}

/** Nothing lost after a failed run: each file in inbox/, done/ (its row written) or processing/ (its claim kept). */
async function expectNothingLost(q: { root: string; sql: SQL }) {
  const at = (d: string) => list(join(q.root, d))
  expect(at("error")).toEqual([])
  expect([...at("inbox"), ...at("processing"), ...at("done")].sort()).toEqual(names)
  const claimed = new Set(((await q.sql`SELECT name FROM claims`) as { name: string }[]).map((r) => r.name))
  for (const name of at("processing")) expect([name, claimed.has(name)]).toEqual([name, true])
  const processed = ((await q.sql`SELECT file FROM processed`) as { file: string }[]).map((r) => r.file)
  for (const name of at("done")) expect(processed).toContain(name)
}

/** The run after the cause is gone ends as a clean run: every file done once, one row per msg_id. */
async function expectCleanRerun(q: { root: string; url: string; sql: SQL }) {
  const r = await consume(q.root, q.url)
  expect({ exitCode: r.exitCode, stderr: r.stderr }).toMatchObject({ exitCode: 0 })
  for (const d of ["inbox", "processing", "error"]) expect([d, list(join(q.root, d))]).toEqual([d, []])
  expect(list(join(q.root, "done"))).toEqual(names)
  const rows = (await q.sql`SELECT msg_id FROM processed ORDER BY msg_id`) as { msg_id: string }[]
  expect(rows.map((r) => r.msg_id)).toEqual(ids)
  expect(await q.sql`SELECT msg_id FROM duplicates`).toEqual([])
  expect(await q.sql`SELECT name FROM claims`).toEqual([])
}

pg("a lock held by another session (PostgreSQL)", () => {
  it(
    "ends consume with exit 3 after --busy-timeout, saying who holds what and what to do, and a rerun finishes",
    async () => {
      await using q = await boundQueue()
      let r: Awaited<ReturnType<typeof consume>> | undefined
      await q.sql.begin(async (tx) => {
        await tx`LOCK TABLE processed`
        r = await consume(q.root, q.url, ["--busy-timeout", "500ms"])
      })
      expect(r?.stderr).toContain("was locked by another session for more than 500ms")
      expect(r?.stderr).toContain("raise --busy-timeout")
      expect(r?.stderr).toContain("nothing is lost")
      expect(r?.stderr).not.toContain("unexpected failure")
      expect(r?.exitCode).toBe(3)
      await expectNothingLost(q)
      await expectCleanRerun(q)
    },
    slow,
  )

  it(
    "fails a library drain after busyTimeoutMs with the same message, and a later drain finishes",
    async () => {
      await using q = await boundQueue()
      await using consumer = await createPostgresConsumer({ root: q.root, ledger: q.url, busyTimeoutMs: 300 })
      let failure: unknown
      await q.sql.begin(async (tx) => {
        await tx`LOCK TABLE processed`
        failure = await consumer.drain().catch((error: unknown) => error)
      })
      expect(failure).toBeInstanceOf(SpoolError)
      expect((failure as SpoolError).code).toBe("ledger")
      expect((failure as SpoolError).message).toContain("was locked by another session for more than 300ms")
      await expectNothingLost(q)
      const summary = await consumer.drain()
      expect(summary.processed).toBe(n)
      expect(list(join(q.root, "done"))).toEqual(names)
    },
    slow,
  )
})

pg("the server's statement_timeout (PostgreSQL)", () => {
  it(
    "is named as what cancelled the statement, not as an unreachable server, and a rerun without it finishes",
    async () => {
      await using q = await boundQueue()
      // The insert waits on a lock far longer than the statement_timeout, far shorter than the busy timeout.
      await q.sql.unsafe(`ALTER DATABASE ${q.name} SET statement_timeout = '300ms'`)
      let r: Awaited<ReturnType<typeof consume>> | undefined
      await q.sql.begin(async (tx) => {
        await tx`LOCK TABLE processed`
        r = await consume(q.root, q.url, ["--busy-timeout", "60s"])
      })
      await q.sql.unsafe(`ALTER DATABASE ${q.name} RESET statement_timeout`)
      expect(r?.stderr).toContain("was cancelled by the server's statement_timeout")
      expect(r?.stderr).toContain("RESET statement_timeout")
      expect(r?.stderr).not.toContain("cannot reach")
      expect(r?.stderr).toContain("nothing is lost")
      expect(r?.exitCode).toBe(3)
      await expectNothingLost(q)
      await expectCleanRerun(q)
    },
    slow,
  )
})

pg("sessions ended by pg_terminate_backend (PostgreSQL)", () => {
  it.each(["before-recovery", "before-attempt", "after-claim", "in-commit", "after-commit"])(
    "at %s: exit 3 saying the connection was closed and nothing is lost, or a finished run; a rerun finishes",
    async (step) => {
      await using q = await boundQueue()
      if (step === "before-attempt") {
        // A dead consumer's claims whose files recovery retries alone.
        const killed = await consume(q.root, q.url, ["--batch-size", "4"], { SPOOL_FAULT: "after-claim" })
        expect(killed.signalCode).toBe("SIGKILL")
      }
      const c = startConsume(q.root, ["--ledger", q.url, "--batch-size", "4"], {
        SPOOL_LEDGER_URL: "",
        SPOOL_FAULT: step,
        SPOOL_FAULT_SIGNAL: "SIGSTOP",
      })
      try {
        for (const deadline = Date.now() + 60_000; !isStopped(c.proc.pid); await Bun.sleep(5))
          if (c.proc.exitCode !== null || Date.now() > deadline) {
            c.proc.kill("SIGKILL")
            throw new Error(`consume never stopped at ${step}: ${(await c.finished).stderr}`)
          }
        const ended = await q.sql`
          SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()`
        expect(ended.length).toBeGreaterThan(0)
      } finally {
        c.proc.kill("SIGCONT")
      }
      const r = await c.finished
      expect(r.stderr).not.toContain("unexpected failure")
      if (r.exitCode !== 0) {
        expect(r.stderr).toContain("was closed (terminating connection due to administrator command)")
        expect(r.stderr).toContain("nothing is lost")
        expect(r.exitCode).toBe(3)
      }
      await expectNothingLost(q)
      await expectCleanRerun(q)
    },
    slow,
  )
})
