// The SQLite ledger's half of `delete`: the deletion recorded and the file unlinked under the
// write lock, so no consumer picks a deferred file up, and no replay moves a failed one, between
// the check and the unlink.
import type { DeletionDir, DeletionRecord } from "../model.ts"
import type { SqliteLedger } from "./ledger.ts"

const sql = {
  /** Every open failure under the name, the latest first: one left by a file removed by hand closes too. */
  closeFailures: `UPDATE failures SET deleted_at = ?1 WHERE file = ?2 AND replayed_at IS NULL AND deleted_at IS NULL
    RETURNING id, reason`,
  deferral: "SELECT msg_id, claim_id FROM deferrals WHERE file = ?",
  /** A pickup in hand: claimDue made the deferrals row this claim's and will rename the file. */
  pickedUp: "SELECT 1 FROM claims WHERE name = ? AND claim_id = ? AND state = 'claimed'",
  forgetDeferral: "DELETE FROM deferrals WHERE file = ?",
  logDeletion: "INSERT INTO deletions (file, dir, failure_id, msg_id, deleted_at) VALUES (?, ?, ?, ?, ?)",
} as const

/** A deletion's ledger half around its unlink (see LedgerPort.recordDeletion), in one IMMEDIATE transaction. */
export function recordDeletion(
  l: SqliteLedger,
  file: string,
  dir: DeletionDir,
  now: string,
  remove: () => void,
): DeletionRecord {
  const db = l.db
  return l.transaction((): DeletionRecord => {
    if (dir === "error") {
      const closed = db.query(sql.closeFailures).all(now, file) as { id: number; reason: string }[]
      const latest = closed.reduce<{ id: number; reason: string } | undefined>(
        (a, r) => (a && a.id > r.id ? a : r),
        undefined,
      )
      db.run(sql.logDeletion, [file, dir, latest?.id ?? null, null, now])
      remove()
      return latest === undefined ? { kind: "deleted" } : { kind: "deleted", reason: latest.reason }
    }
    const d = db.query(sql.deferral).get(file) as { msg_id: string; claim_id: string } | null
    if (d !== null && db.query(sql.pickedUp).get(file, d.claim_id) !== null) return { kind: "in-use" }
    db.run(sql.forgetDeferral, [file])
    db.run(sql.logDeletion, [file, dir, null, d?.msg_id ?? null, now])
    remove()
    return d === null ? { kind: "deleted" } : { kind: "deleted", msgId: d.msg_id }
  })
}
