// Many consumers on one root: each file is claimed by exactly one of them and the end state
// is the one a single consumer reaches. Real processes, started together.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  consumeToEnd,
  generateMessages,
  makeQueueFrom,
  snapshot,
  startConsume,
  tempDir,
  withoutWinners,
} from "@spool/test-support"

describe("four consume processes on one root at once", () => {
  it("claim each file exactly once and end as a single consumer does", async () => {
    await using t = await tempDir()
    generateMessages(join(t.path, "src"), 3000, 4242)
    const ref = join(t.path, "ref")
    const root = join(t.path, "q")
    makeQueueFrom(join(t.path, "src"), ref)
    makeQueueFrom(join(t.path, "src"), root)
    await consumeToEnd(ref, ["--batch-size", "1000"])

    const runs = await Promise.all(Array.from({ length: 4 }, () => startConsume(root, ["--batch-size", "10"]).finished))
    for (const r of runs) {
      expect(r.stderr).not.toMatch(/database is locked|SQLITE_BUSY|unexpected failure/i)
      expect(r.exitCode).toBe(0)
    }
    // Every input file is committed exactly once: one ledger row per file name, across tables.
    const db = new Database(join(root, "ledger.db"), { readonly: true })
    const committed = db
      .query(
        "SELECT file, claim_id FROM processed UNION ALL SELECT file, claim_id FROM duplicates UNION ALL SELECT original, claim_id FROM failures",
      )
      .all() as { file: string; claim_id: string }[]
    // The processed row of each msg_id comes from its own file (no mix of two deliveries).
    const processed = db.query("SELECT msg_id, order_no, seq, file FROM processed").all() as {
      msg_id: string
      order_no: string
      seq: number
      file: string
    }[]
    // A duplicate is a conflict exactly when its content differs from the processed one's.
    const badFlags = db
      .query(
        "SELECT d.file FROM duplicates d JOIN processed p USING (msg_id) WHERE d.is_conflict != (d.content_hash != p.content_hash)",
      )
      .all()
    db.close()
    expect(committed.map((r) => r.file).sort()).toEqual(fs.readdirSync(join(t.path, "src")).sort())
    // The work really was shared: claim ids start with their owner's id.
    const owners = new Set(committed.map((r) => r.claim_id.split(".")[0]))
    expect(owners.size).toBeGreaterThanOrEqual(2)
    for (const p of processed) {
      const m = JSON.parse(fs.readFileSync(join(root, "done", p.file), "utf8"))
      expect([m.msg_id, m.order_no, m.seq]).toEqual([p.msg_id, p.order_no, p.seq])
    }
    expect(badFlags).toEqual([])

    expect(withoutWinners(snapshot(root))).toEqual(withoutWinners(snapshot(ref)))
  }, 120_000)
})
