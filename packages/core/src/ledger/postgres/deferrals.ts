// The PostgreSQL ledger's deferred files: the pickup of due ones, their rows read, renamed
// and dropped, and the counts lag and stats show. PostgresLedger's methods call these.

import { type Claim, type Deferral, type RawDeferral, toDeferral } from "../model.ts"
import { pgArray } from "./arrays.ts"
import { inOrder } from "./claims.ts"
import * as lease from "./lease.ts"
import type { PostgresLedger } from "./ledger.ts"

/** Claims due deferred files (see the SQLite ledger's claimDue), one row at a time in the order given. */
export async function claimDue(
  l: PostgresLedger,
  ownerId: string,
  rows: readonly { readonly d: Deferral; readonly claimId: string }[],
  now: string,
  forget: readonly Claim[],
): Promise<Claim[]> {
  l.vacuum.forgot(forget.length)
  return l.transaction(async (tx) => {
    // Lazily, as a claim of inbox/ files (see claims.ts): the pickup's rows need to be on disk
    // only before the commit of their outcomes, whose WAL flush writes them too.
    await inOrder([
      tx`SET LOCAL synchronous_commit = off`,
      forget.length > 0
        ? tx`
          DELETE FROM claims
          WHERE root_id = ${l.rootId} AND name = ANY (${pgArray(forget.map((c) => c.name))}::text[])
            AND owner_id = ${ownerId} AND state = 'committed'`
        : undefined,
      tx.unsafe(lease.heartbeat, [ownerId]),
    ])
    const claimed: Claim[] = []
    for (const { d, claimId } of rows) {
      const inserted = await tx`
        INSERT INTO claims (root_id, name, claim_id, owner_id, attempts, state, claimed_at)
        VALUES (${l.rootId}, ${d.file}, ${claimId}, ${ownerId}, 1, 'claimed', ${now})
        ON CONFLICT (root_id, name) DO NOTHING RETURNING claim_id`
      if (inserted.length === 0) continue
      const picked = await tx`
        UPDATE deferrals SET claim_id = ${claimId}
        WHERE root_id = ${l.rootId} AND file = ${d.file} AND claim_id = ${d.claimId} AND next_attempt_at <= ${now}`
      if (picked.count === 1) {
        claimed.push({ name: d.file, claimId, attempts: 1 })
        // A landed delivery's origin goes with it to the claim that picks it up (see 0006-origins.sql).
        await tx`
          INSERT INTO origins (root_id, claim_id, name, payload_hash, delivery_id, source, address, headers, message_id, landed_at)
          SELECT root_id, ${claimId}, name, payload_hash, delivery_id, source, address, headers, message_id, landed_at
          FROM origins WHERE root_id = ${l.rootId} AND claim_id = ${d.claimId}`
      } else await tx`DELETE FROM claims WHERE root_id = ${l.rootId} AND name = ${d.file} AND claim_id = ${claimId}`
    }
    return claimed
  })
}

export async function dueDeferrals(l: PostgresLedger, now: string, limit: number): Promise<Deferral[]> {
  const rows = await l.sql`
    SELECT file, msg_id, attempts, first_deferred_at, next_attempt_at, last_error, claim_id, payload_hash FROM deferrals
    WHERE root_id = ${l.rootId} AND next_attempt_at <= ${now}
    ORDER BY next_attempt_at, file COLLATE "C" LIMIT ${limit}`
  return (rows as RawDeferral[]).map(toDeferral)
}

export async function nextDeferralAt(l: PostgresLedger): Promise<string | undefined> {
  const [r] = await l.sql`SELECT min(next_attempt_at) AS at FROM deferrals WHERE root_id = ${l.rootId}`
  return (r?.at as string | null) ?? undefined
}

export async function deferralOf(l: PostgresLedger, claimId: string): Promise<Deferral | undefined> {
  const [r] = await l.sql`
    SELECT file, msg_id, attempts, first_deferred_at, next_attempt_at, last_error, claim_id, payload_hash FROM deferrals
    WHERE root_id = ${l.rootId} AND claim_id = ${claimId}`
  return r === undefined ? undefined : toDeferral(r as RawDeferral)
}

export async function deferralsAt(l: PostgresLedger, files: readonly string[]): Promise<Map<string, Deferral>> {
  if (files.length === 0) return new Map()
  const rows = await l.sql`
    SELECT file, msg_id, attempts, first_deferred_at, next_attempt_at, last_error, claim_id, payload_hash FROM deferrals
    WHERE root_id = ${l.rootId} AND file = ANY (ARRAY(SELECT jsonb_array_elements_text(${files}::jsonb)))`
  return new Map((rows as RawDeferral[]).map((r) => [r.file, toDeferral(r)]))
}

export async function renameDeferral(l: PostgresLedger, claimId: string, file: string): Promise<void> {
  await l.sql`UPDATE deferrals SET file = ${file} WHERE root_id = ${l.rootId} AND claim_id = ${claimId}`
}

export async function dropDeferral(l: PostgresLedger, claim: Claim, ownerId: string): Promise<void> {
  await l.transaction(async (tx) => {
    await tx`DELETE FROM deferrals WHERE root_id = ${l.rootId} AND file = ${claim.name} AND claim_id = ${claim.claimId}`
    await tx`
      DELETE FROM claims
      WHERE root_id = ${l.rootId} AND name = ${claim.name} AND claim_id = ${claim.claimId} AND owner_id = ${ownerId}`
  })
}

export async function deferralCounts(l: PostgresLedger, now: string): Promise<{ deferred: number; due: number }> {
  const [r] = await l.sql`
    SELECT count(*)::int AS deferred, (count(*) FILTER (WHERE next_attempt_at <= ${now}))::int AS due
    FROM deferrals WHERE root_id = ${l.rootId}`
  return { deferred: Number(r?.deferred ?? 0), due: Number(r?.due ?? 0) }
}
