// The PostgreSQL ledger's half of `delete`, in one transaction: replay's advisory lock on the
// file's name serializes it with a replay of the same file, and the deferrals row's lock with a
// consumer picking the file up (claimDue updates that row).
import type { DeletionDir, DeletionRecord } from "../model.ts"
import type { PostgresLedger } from "./ledger.ts"
import { replayLockKey } from "./operator.ts"

/** A deletion's ledger half around its unlink (see LedgerPort.recordDeletion). */
export function recordDeletion(
  l: PostgresLedger,
  file: string,
  dir: DeletionDir,
  now: string,
  remove: () => void,
): Promise<DeletionRecord> {
  const root = l.rootId
  return l.transaction(async (tx): Promise<DeletionRecord> => {
    if (dir === "error") {
      await tx`SELECT pg_advisory_xact_lock(hashtext(${replayLockKey(root, file)}))`
      // Every open failure under the name: one left by a file removed by hand closes too.
      const closed = (await tx`
        UPDATE failures SET deleted_at = ${now}
        WHERE root_id = ${root} AND file = ${file} AND replayed_at IS NULL AND deleted_at IS NULL
        RETURNING id, reason`) as { id: string | number; reason: string }[]
      const latest = closed.reduce<(typeof closed)[number] | undefined>(
        (a, r) => (a && Number(a.id) > Number(r.id) ? a : r),
        undefined,
      )
      await tx`INSERT INTO deletions (root_id, file, dir, failure_id, msg_id, deleted_at)
        VALUES (${root}, ${file}, ${dir}, ${latest?.id ?? null}, ${null}, ${now})`
      remove()
      return latest === undefined ? { kind: "deleted" } : { kind: "deleted", reason: latest.reason }
    }
    const [d] = (await tx`
      SELECT msg_id, claim_id FROM deferrals WHERE root_id = ${root} AND file = ${file} FOR UPDATE`) as {
      msg_id: string
      claim_id: string
    }[]
    if (d !== undefined) {
      // A pickup in hand: claimDue made the row this claim's and will rename the file.
      const held = await tx`SELECT 1 FROM claims
        WHERE root_id = ${root} AND name = ${file} AND claim_id = ${d.claim_id} AND state = 'claimed'`
      if (held.length > 0) return { kind: "in-use" }
      await tx`DELETE FROM deferrals WHERE root_id = ${root} AND file = ${file}`
    }
    await tx`INSERT INTO deletions (root_id, file, dir, failure_id, msg_id, deleted_at)
      VALUES (${root}, ${file}, ${dir}, ${null}, ${d?.msg_id ?? null}, ${now})`
    remove()
    return d === undefined ? { kind: "deleted" } : { kind: "deleted", msgId: d.msg_id }
  })
}
