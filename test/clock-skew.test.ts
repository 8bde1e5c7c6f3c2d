// Hosts whose clocks disagree, sharing a PostgreSQL ledger. A consumer on another host is
// judged alive by its heartbeat; the heartbeat is written and judged by the database server's
// clock, so a host whose clock is minutes ahead never takes over the live claims of one whose
// clock is right, and one whose clock is behind never looks dead to the others.
//
// The hosts are made here: consumer A stops (SIGSTOP) right after it has claimed its batch,
// its consumers row is rewritten to name another host (so only its heartbeat can tell whether
// it is alive), and consumer B runs to its end; SPOOL_CLOCK_OFFSET sets either one's clock
// five minutes off, more than twice the lease.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { list, pgUnavailable, startConsume, tempDatabase, tempQueue } from "@spool/test-support"
import { SQL } from "bun"

const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)

/** Waits (bounded) until process `pid` is stopped. */
async function stopped(pid: number): Promise<void> {
  for (let i = 0; i < 6000; i++) {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("T")) return
    await Bun.sleep(10)
  }
  throw new Error(`process ${pid} never stopped at after-claim`)
}

const cases = [
  {
    a: "0ms",
    b: "+5m",
    title: "a consumer whose clock is 5 minutes ahead leaves the live claims of one whose clock is right",
  },
  { a: "-5m", b: "0ms", title: "a consumer whose clock is 5 minutes behind keeps its live claims" },
]

;(pgSkip ? describe.skip : describe)("hosts' clocks on a shared PostgreSQL ledger", () => {
  for (const { a, b, title } of cases)
    it(title, async () => {
      await using db = await tempDatabase()
      await using q = await tempQueue()
      const names = Array.from({ length: 6 }, (_, i) => `m-${i}.json`)
      for (const [i, name] of names.entries())
        q.put(name, { msg_id: `id-${i}`, order_no: "O-1", seq: i + 1, amount: 1.25 })
      const args = ["--ledger", db.url, "--log-format", "json"]
      const first = startConsume(q.root, args, {
        SPOOL_FAULT: "after-claim",
        SPOOL_FAULT_SIGNAL: "SIGSTOP",
        SPOOL_CLOCK_OFFSET: a,
      })
      const sql = new SQL({ url: db.url, max: 1 })
      try {
        await stopped(first.proc.pid)
        expect(list(join(q.root, "processing"))).toEqual(names)
        await sql`UPDATE consumers SET host = 'elsewhere.example' WHERE pid = ${first.proc.pid}`
        const [owner] = await sql`SELECT owner_id FROM consumers WHERE pid = ${first.proc.pid}`
        const claimsOfA = async () =>
          (await sql`SELECT name FROM claims WHERE owner_id = ${owner.owner_id} ORDER BY name`).map(
            (r: { name: string }) => r.name,
          )
        expect(await claimsOfA()).toEqual(names)

        const second = await startConsume(q.root, args, { SPOOL_CLOCK_OFFSET: b }).finished
        expect(second.stderr).not.toContain('"msg":"recovered"')
        expect(second.exitCode).toBe(0)
        // A's claims are still A's, its files still in processing/.
        expect(await claimsOfA()).toEqual(names)
        expect(list(join(q.root, "processing"))).toEqual(names)

        first.proc.kill("SIGCONT")
        const r = await first.finished
        expect(r.stderr).not.toContain("lost-claim")
        expect(r.exitCode).toBe(0)
        expect(list(join(q.root, "done"))).toEqual(names)
        expect(list(join(q.root, "processing"))).toEqual([])
        const [counts] = await sql`
          SELECT (SELECT COUNT(*)::int FROM processed) AS processed, (SELECT COUNT(*)::int FROM duplicates) AS duplicates`
        expect({ ...counts }).toEqual({ processed: names.length, duplicates: 0 })
      } finally {
        if (first.proc.exitCode === null) {
          first.proc.kill("SIGKILL")
          first.proc.kill("SIGCONT")
        }
        await first.finished
        await sql.close()
      }
    }, 120_000)
})
