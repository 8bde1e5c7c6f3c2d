// `compact --horizon` landing inside a consumer's commit, on both ledgers. The consumer stops
// itself inside its commit transaction (SPOOL_FAULT=in-commit, SPOOL_FAULT_SIGNAL=SIGSTOP):
// the horizon asked, no processed row inserted yet. A compact that prunes the keys of the very
// msg_ids that commit redelivers is started then, and the consumer resumed only once the
// compact has finished or waits for a lock. Each redelivery must end as a duplicate (committed
// before the prune) or beyond-horizon (after it), never processed a second time.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { type BackendQueue, isStopped, ledgerBackends, list, repoRoot, startConsume } from "@spool/test-support"

const messages = 12
const day = 86_400_000
const msg = (i: number) => ({ msg_id: `h-${i}`, order_no: `o-${i % 3}`, seq: i + 1, amount: i })
const ids = Array.from({ length: messages }, (_, i) => `h-${i}`)
const seed = Object.fromEntries(ids.map((id, i) => [`${id}.json`, msg(i)]))
const compactBin = join(repoRoot, "packages/consumer/bin/compact.ts")

/**
 * Whether `pid` is waiting for the ledger: on PostgreSQL a session of the ledger's database
 * waits for a lock; on SQLite, whose writers take the one write lock at BEGIN, the process
 * has the ledger open (it cannot write before the stopped commit ends, however far it got).
 */
async function isWaiting(q: BackendQueue, pid: number): Promise<boolean> {
  if (q.url !== undefined)
    return (
      (
        await q.rows(
          "SELECT 1 AS one FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE NOT l.granted AND d.datname = current_database()",
        )
      ).length > 0
    )
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === join(q.root, "ledger.db")
      } catch {
        return false
      }
    })
  } catch {
    return false
  }
}

/** Polls `condition` every 5 ms until it holds, failing after a bound that no machine's speed decides. */
async function until(what: string, condition: () => boolean | Promise<boolean>): Promise<void> {
  for (const deadline = Date.now() + 60_000; !(await condition()); await Bun.sleep(5))
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`)
}

const backends = await ledgerBackends()

for (const backend of backends)
  (backend.skip ? describe.skip : describe)(`compact --horizon during a commit (${backend.name})`, () => {
    const rounds = [1, 2, 3].flatMap((commit) => [
      { commit, pipeline: true },
      { commit, pipeline: false },
    ])
    it.each(rounds)(
      "never applies a redelivery twice when the prune lands in commit $commit (pipeline $pipeline)",
      async ({ commit, pipeline }) => {
        await using q = await backend.queue({ seed })
        expect((await q.command("consume")).exitCode).toBe(0)
        // Old enough for the horizon to prune every key, then every message delivered again.
        await q.exec("UPDATE processed SET processed_at = ?", [new Date(Date.now() - 2 * day).toISOString()])
        for (let i = 0; i < messages; i++) q.put(`r-${i}.json`, msg(i))

        const consumer = startConsume(
          q.root,
          [...q.ledgerArgs, "--batch-size", "4", ...(pipeline ? [] : ["--one-thread"])],
          { SPOOL_LEDGER_URL: "", SPOOL_FAULT: `in-commit@${commit}`, SPOOL_FAULT_SIGNAL: "SIGSTOP" },
        )
        let compact: Bun.Subprocess<"ignore", "pipe", "pipe"> | undefined
        try {
          await until("consume stops inside its commit", async () => {
            if (consumer.proc.exitCode !== null) throw new Error((await consumer.finished).stderr)
            return isStopped(consumer.proc.pid)
          })
          compact = Bun.spawn(["bun", compactBin, ...q.args, "--older-than", "1d", "--horizon", "1d", "--delete"], {
            cwd: repoRoot,
            env: { ...process.env, SPOOL_LEDGER_URL: "" },
            stdout: "pipe",
            stderr: "pipe",
          })
          const c = compact
          await until("compact ends or waits for the commit", async () => c.exitCode !== null || isWaiting(q, c.pid))
        } finally {
          consumer.proc.kill("SIGCONT")
        }
        const [consumed, compacted, compactErr] = await Promise.all([
          consumer.finished,
          compact.exited,
          new Response(compact.stderr).text(),
        ])
        expect(consumed.exitCode).toBe(0)
        expect({ compacted, compactErr }).toEqual({ compacted: 0, compactErr: "" })

        // Every key was pruned, and none came back: no redelivery was processed.
        expect(await q.rows("SELECT msg_id FROM processed")).toEqual([])
        const duplicates = (await q.rows("SELECT msg_id FROM duplicates WHERE file LIKE 'r-%'")).map((r) => r.msg_id)
        const beyond = (await q.rows("SELECT file FROM failures WHERE reason = 'beyond-horizon'")).map(
          (r) => `h-${String(r.file).slice(2, -5)}`,
        )
        expect([...duplicates, ...beyond].sort()).toEqual([...ids].sort())
        expect(list(join(q.root, "processing"))).toEqual([])
        expect(list(join(q.root, "inbox"))).toEqual([])
      },
      120_000,
    )
  })
