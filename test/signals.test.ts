// Graceful stop: SIGTERM or SIGINT finishes the batch in hand, claims nothing more, leaves
// nothing in processing/, writes the reports and exits 0; a later run finishes the queue.
import { Database } from "bun:sqlite"
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  consumeToEnd,
  diffSnapshots,
  generateMessages,
  list,
  makeQueueFrom,
  type Snapshot,
  snapshot,
  startConsume,
  type TempDir,
  tempDir,
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

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
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
      expect(r.exitCode).toBe(0)

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
})
