// Many consumers on one root: each file is claimed by exactly one of them and the end state
// is the one a single consumer reaches. Real processes, started together.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { consumeToEnd, generateMessages, makeQueueFrom, type Snapshot, startConsume } from "./_chaos.ts"
import { snapshot, tempDir } from "./support.ts"

type Delivery = { msg_id: string; file: string; payload_hash: string }

/**
 * The end state with the one thing concurrency may legitimately change factored out: which
 * delivery of a msg_id came first. With several consumers the order of commits is a race, so
 * the processed row of a redelivered msg_id may name either file, and whether a later delivery
 * is flagged as a conflict depends on which came first. Everything else must be equal as is.
 */
function normalize(s: Snapshot) {
  const deliveries = new Map<string, string[]>()
  for (const d of [...(s.processed as Delivery[]), ...(s.duplicates as Delivery[])])
    deliveries.set(d.msg_id, [...(deliveries.get(d.msg_id) ?? []), `${d.file}:${d.payload_hash}`].sort())
  return {
    inbox: s.inbox,
    processing: s.processing,
    done: s.done,
    error: s.error,
    failures: s.failures,
    claims: s.claims,
    dupTxt: s.dupTxt,
    errorCsv: s.errorCsv,
    processedIds: (s.processed as Delivery[]).map((r) => r.msg_id),
    deliveries: Object.fromEntries([...deliveries].sort(([a], [b]) => (a < b ? -1 : 1))),
  }
}

describe("four consume processes on one root at once", () => {
  it("claim each file exactly once and end as a single consumer does", async () => {
    await using t = await tempDir()
    generateMessages(join(t.path, "src"), 3000, 4242)
    const ref = join(t.path, "ref")
    const root = join(t.path, "q")
    makeQueueFrom(join(t.path, "src"), ref)
    makeQueueFrom(join(t.path, "src"), root)
    await consumeToEnd(ref, ["--batch-size", "25"])

    const runs = await Promise.all(Array.from({ length: 4 }, () => startConsume(root, ["--batch-size", "25"]).finished))
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

    expect(normalize(snapshot(root))).toEqual(normalize(snapshot(ref)))
  }, 120_000)
})
