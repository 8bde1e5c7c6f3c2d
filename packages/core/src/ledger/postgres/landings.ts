// The PostgreSQL ledger's landed broker deliveries (see ../landings.ts): their claims with the
// source's attempts and their origins rows in one transaction, and which landed pairs already
// have an outcome, and which claims landed one, within this root.
import { type FailureOriginRow, originParams, toFailureOrigin } from "../landings.ts"
import { type Claim, type FailureOrigin, type Landing, landingKey } from "../model.ts"
import { pgArray } from "./arrays.ts"
import * as claims from "./claims.ts"
import type { PostgresLedger } from "./ledger.ts"

export async function claimLanded(
  l: PostgresLedger,
  ownerId: string,
  rows: readonly { readonly name: string; readonly claim_id: string }[],
  landings: readonly Landing[],
  now: string,
  forget: readonly Claim[],
): Promise<Claim[]> {
  const byName = new Map(landings.map((x) => [x.name, x]))
  const taken = await claims.claim(l, ownerId, rows, now, forget, async (tx, claimed) => {
    if (claimed.length === 0) return
    const origins = claimed.map((c) => {
      const [claim_id, name, payload_hash, delivery_id, source, address, headers, message_id, landed_at] = originParams(
        c.claimId,
        byName.get(c.name) as Landing,
        now,
      )
      const attempts = (byName.get(c.name) as Landing).attempts
      return { claim_id, name, payload_hash, delivery_id, source, address, headers, message_id, landed_at, attempts }
    })
    await tx`
      UPDATE claims c SET attempts = t.attempts
      FROM jsonb_to_recordset(${origins}::jsonb) AS t(name text, claim_id text, attempts integer)
      WHERE c.root_id = ${l.rootId} AND c.name = t.name AND c.claim_id = t.claim_id`
    await tx`
      INSERT INTO origins (root_id, claim_id, name, payload_hash, delivery_id, source, address, headers, message_id, landed_at)
      SELECT ${l.rootId}, t.claim_id, t.name, t.payload_hash, t.delivery_id, t.source, t.address, t.headers, t.message_id, t.landed_at
      FROM jsonb_to_recordset(${origins}::jsonb) AS t(claim_id text, name text, payload_hash text, delivery_id text,
        source text, address text, headers text, message_id text, landed_at text)`
  })
  return taken.map((c) => ({ ...c, attempts: (byName.get(c.name) as Landing).attempts }))
}

export async function committedLandings(
  l: PostgresLedger,
  pairs: readonly { readonly name: string; readonly payloadHash: string }[],
): Promise<Set<string>> {
  if (pairs.length === 0) return new Set()
  const wanted = pairs.map((p) => ({ name: p.name, payload_hash: p.payloadHash }))
  const rows = (await l.sql`
    SELECT DISTINCT o.name, o.payload_hash
    FROM jsonb_to_recordset(${wanted}::jsonb) AS t(name text, payload_hash text)
    JOIN origins o ON o.root_id = ${l.rootId} AND o.name = t.name AND o.payload_hash = t.payload_hash
    WHERE EXISTS (SELECT 1 FROM processed p WHERE p.root_id = o.root_id AND p.claim_id = o.claim_id)
       OR EXISTS (SELECT 1 FROM duplicates d WHERE d.root_id = o.root_id AND d.claim_id = o.claim_id)
       OR EXISTS (SELECT 1 FROM failures f WHERE f.root_id = o.root_id AND f.claim_id = o.claim_id)
       OR EXISTS (SELECT 1 FROM deferrals r WHERE r.root_id = o.root_id AND r.claim_id = o.claim_id)`) as {
    name: string
    payload_hash: string
  }[]
  return new Set(rows.map((r) => landingKey(r.name, r.payload_hash)))
}

/** Which of these claims landed a broker delivery: the claim ids with an origins row in this root. */
export async function landedClaims(l: PostgresLedger, claimIds: readonly string[]): Promise<Set<string>> {
  if (claimIds.length === 0) return new Set()
  const rows = (await l.sql`
    SELECT claim_id FROM origins WHERE root_id = ${l.rootId} AND claim_id = ANY(${pgArray(claimIds)}::text[])`) as {
    claim_id: string
  }[]
  return new Set(rows.map((r) => r.claim_id))
}

/** The origins row of the latest unreplayed failure under `file` in this root's error/, if it has one. */
export async function failureOrigin(l: PostgresLedger, file: string): Promise<FailureOrigin | undefined> {
  const rows = (await l.sql`
    SELECT o.claim_id, o.source, o.address, o.headers, o.message_id
    FROM (SELECT claim_id FROM failures WHERE root_id = ${l.rootId} AND file = ${file} AND replayed_at IS NULL AND deleted_at IS NULL
          ORDER BY id DESC LIMIT 1) f
    JOIN origins o ON o.root_id = ${l.rootId} AND o.claim_id = f.claim_id`) as FailureOriginRow[]
  const [row] = rows
  return row === undefined ? undefined : toFailureOrigin(row)
}
