// Graceful stop: SIGTERM, SIGINT or SIGHUP finishes the batch in hand, claims nothing more,
// leaves nothing in processing/, writes the reports and exits 4 (a one-shot drain cut short);
// a later run finishes the queue. A --concurrency run takes back a killed worker's files
// before it exits, and refuses more workers than the machine can use.
import { Database } from "bun:sqlite"
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { availableParallelism } from "node:os"
import { join } from "node:path"
import {
  childPids,
  consumeToEnd,
  diffSnapshots,
  generateMessages,
  list,
  makeQueueFrom,
  type Snapshot,
  snapshot,
  spool,
  startConsume,
  type TempDir,
  tempDir,
  tempQueue,
} from "@spool/test-support"

describe("consume stopped by a signal", () => {
  let t: TempDir
  let reference: Snapshot
  const total = 2000
  // Small batches: the run is still far from done when the signal comes, on any machine.
  const args = ["--batch-size", "5"]

  beforeAll(async () => {
    t = await tempDir()
    generateMessages(join(t.path, "src"), total, 31)
    makeQueueFrom(join(t.path, "src"), join(t.path, "ref"))
    // One pass processes inbox/ in directory order whatever the batch size: big batches are faster.
    await consumeToEnd(join(t.path, "ref"), ["--batch-size", "500"])
    reference = snapshot(join(t.path, "ref"))
  }, 60_000)
  afterAll(() => t[Symbol.asyncDispose](), 60_000)

  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    it(`${signal} ends the run cleanly at a batch boundary and a later run finishes equivalently`, async () => {
      const root = join(t.path, signal)
      makeQueueFrom(join(t.path, "src"), root)
      const c = startConsume(root, args)
      // Wait (bounded) until the run has moved a file out: its signal handlers are installed.
      const done = join(root, "done")
      const before = fs.statSync(done).mtimeMs
      for (let i = 0; i < 3000 && fs.statSync(done).mtimeMs === before; i++) await Bun.sleep(10)
      c.proc.kill(signal)
      const r = await c.finished
      expect(r.stderr).toContain("stopping")
      expect(r.exitCode).toBe(4)

      expect(list(join(root, "processing"))).toEqual([])
      const inbox = list(join(root, "inbox"))
      const handled = [...list(done), ...list(join(root, "error"))]
      expect(inbox.length).toBeGreaterThan(0)
      expect(handled.length).toBeGreaterThan(0)
      expect(inbox.length + handled.length).toBe(total)
      // Reports describe what was handled so far.
      const errorCsv = fs.readFileSync(join(root, "error.csv"), "utf8").trim().split("\n")
      expect(errorCsv.slice(1).map((l) => l.split(",")[0])).toEqual(list(join(root, "error")))
      expect(fs.existsSync(join(root, "dup.txt"))).toBe(true)
      const db = new Database(join(root, "ledger.db"), { readonly: true })
      expect(db.query("SELECT name FROM claims").all()).toEqual([])
      db.close()

      await consumeToEnd(root, ["--batch-size", "500"])
      expect(diffSnapshots(reference, snapshot(root))).toEqual([])
    }, 60_000)
  }

  it("takes back the files of a --concurrency worker killed mid-batch before it exits 3", async () => {
    const root = join(t.path, "killed-worker")
    makeQueueFrom(join(t.path, "src"), root)
    const c = startConsume(root, ["--concurrency", "2", ...args])
    const done = join(root, "done")
    for (let i = 0; i < 3000 && list(done).length < 50; i++) await Bun.sleep(10)
    const workers = childPids(c.proc.pid)
    expect(workers.length).toBe(2)
    process.kill(Number(workers[0]), "SIGKILL")
    const r = await c.finished
    expect(r.exitCode).toBe(3)
    expect(r.stderr).toContain("worker-failed")
    // Nothing waits in processing/ or in the ledger's claims: the run finished what it took.
    expect(list(join(root, "processing"))).toEqual([])
    const db = new Database(join(root, "ledger.db"), { readonly: true })
    expect(db.query("SELECT name FROM claims").all()).toEqual([])
    db.close()
    await consumeToEnd(root, ["--batch-size", "500"])
    // Which delivery of a msg_id wins can differ with two workers; the counts cannot.
    const counts = (s: Snapshot) => ({
      done: Object.keys(s.done).length,
      error: Object.keys(s.error).length,
      processed: s.processed.length,
    })
    expect(counts(snapshot(root))).toEqual(counts(reference))
  }, 60_000)
})

describe("consume --concurrency", () => {
  it("refuses more workers than 4 per core, before starting any", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    const r = await spool("consume", ["--root", q.root, "--concurrency", "1000"])
    expect(r.exitCode).toBe(2)
    expect(r.stderr).toContain(`--concurrency takes at most ${4 * availableParallelism()} on this machine`)
    expect(list(join(q.root, "inbox")).length).toBe(20)
  })
})
