// The PostgreSQL ledger's claim rows: taking a batch of names, listing every claim of a root
// for recovery, and taking dead owners' claims over. PostgresLedger's methods call these.
import type { TransactionSQL } from "bun"
import { type AdoptedRow, adopted, type Claim, type ClaimRow, type RawClaimRow, toClaimRow } from "../model.ts"
import * as lease from "./lease.ts"
import type { PostgresLedger } from "./ledger.ts"

/**
 * Claims those of `rows` nobody holds in this root, each under its new claim id, and forgets
 * `forget` (committed claims whose files have left), in one transaction, in which `andThen`
 * writes what goes with the claims taken. Returns the claims taken in the caller's order.
 */
export function claim(
  l: PostgresLedger,
  ownerId: string,
  rows: readonly { readonly ord: number; readonly name: string; readonly claim_id: string }[],
  now: string,
  forget: readonly Claim[],
  andThen?: (tx: TransactionSQL, taken: readonly Claim[]) => Promise<void>,
): Promise<Claim[]> {
  const gone = forget.map((c) => c.name)
  return l.transaction(async (tx) => {
    // Found through the primary key, one probe per name. A join with the list lets the planner
    // bitmap-scan the (owner_id, state) index instead, whose dead entries from every earlier
    // forget (a bitmap scan never marks them dead) make each batch slower than the last:
    // 150 ms a batch after 50k messages. A name's claim row is unique while it exists, so the
    // name, this owner and the committed state identify the very claim that was moved.
    if (forget.length > 0)
      await tx`
        DELETE FROM claims c
        WHERE c.root_id = ${l.rootId} AND c.name = ANY (ARRAY(SELECT jsonb_array_elements_text(${gone}::jsonb)))
          AND c.owner_id = ${ownerId} AND c.state = 'committed'`
    await tx.unsafe(lease.heartbeat, [ownerId])
    // Inserted in name order (one lock order for every consumer of the root), numbered in the
    // caller's order: seq_no is the claim order recovery redoes a crashed batch in, and it must
    // be the order the batch is processed in, or a retry could let another delivery of a
    // msg_id win. nextval in the sorted subquery runs after its sort, so it counts in `ord`.
    const claimed = await tx`
      INSERT INTO claims (root_id, name, seq_no, claim_id, owner_id, attempts, state, claimed_at)
      OVERRIDING SYSTEM VALUE
      SELECT ${l.rootId}, n.name, n.seq_no, n.claim_id, ${ownerId}, 1, 'claimed', ${now}
      FROM (
        SELECT t.name, t.claim_id, nextval(pg_get_serial_sequence('claims', 'seq_no')) AS seq_no
        FROM jsonb_to_recordset(${rows}::jsonb) AS t(ord integer, name text, claim_id text)
        ORDER BY t.ord
      ) n
      ORDER BY n.name
      ON CONFLICT (root_id, name) DO NOTHING
      RETURNING name, claim_id`
    const byName = new Map((claimed as { name: string; claim_id: string }[]).map((r) => [r.name, r.claim_id]))
    // Keep the caller's (directory) order.
    const taken = rows
      .filter((r) => byName.get(r.name) === r.claim_id)
      .map((r) => ({ name: r.name, claimId: r.claim_id, attempts: 1 }))
    await andThen?.(tx, taken)
    return taken
  })
}

/** Every claim of the ledger's root with its owner's identity, in claim order. */
export async function listClaims(l: PostgresLedger): Promise<ClaimRow[]> {
  const rows = await l.sql`
    SELECT c.name, c.claim_id, c.owner_id, c.attempts, c.state, c.dest, c.dest_name, c.payload_hash,
           o.host, o.pid, o.boot_id, o.start_ticks, o.heartbeat_at, ${l.sql.unsafe(lease.heartbeatAgeMs)} AS heartbeat_age_ms
    FROM claims c LEFT JOIN consumers o ON o.owner_id = c.owner_id
    WHERE c.root_id = ${l.rootId} ORDER BY c.seq_no`
  return (rows as RawClaimRow[]).map(toClaimRow)
}

/**
 * Takes over dead owners' claims; only rows still naming the listed owner are taken. Each is
 * returned as it is once taken, not as it was listed: a consumer killed in the middle of its
 * commit leaves that transaction to the server, which may commit it after the listing (the
 * takeover waits on its row locks). Taken as listed, such a claim would look uncommitted,
 * and its file would be processed again and recorded as a duplicate of itself.
 */
export async function adoptClaims(l: PostgresLedger, rows: readonly ClaimRow[], ownerId: string): Promise<ClaimRow[]> {
  if (rows.length === 0) return []
  const wanted = rows.map((r) => ({ name: r.name, claim_id: r.claimId, owner_id: r.ownerId }))
  const taken = (await l.transaction(
    (tx) => tx`
      UPDATE claims c SET owner_id = ${ownerId}
      FROM jsonb_to_recordset(${wanted}::jsonb) AS t(name text, claim_id text, owner_id text)
      WHERE c.root_id = ${l.rootId} AND c.name = t.name AND c.claim_id = t.claim_id
        AND c.owner_id IS NOT DISTINCT FROM t.owner_id
      RETURNING c.claim_id, c.attempts, c.state, c.dest, c.dest_name, c.payload_hash`,
  )) as (AdoptedRow & Pick<RawClaimRow, "claim_id">)[]
  const current = new Map(taken.map((r) => [r.claim_id, r]))
  return rows.flatMap((r): ClaimRow[] => {
    const t = current.get(r.claimId)
    return t === undefined ? [] : [{ ...r, ownerId, ...adopted(t) }]
  })
}
