// The PostgreSQL ledger's batch commit, set-wise: a few statements for a whole batch, inside the
// transaction PostgresLedger.commit opens (and retries whole on deadlock or serialization
// failure).
import type { TransactionSQL } from "bun"
import type { PostgresEffect } from "./ledger-postgres.ts"
import { beyondHorizon, type Outcome, type Verdict } from "./ledger-types.ts"
import { toStorableText } from "./storable-text.ts"

/**
 * Commits a batch in one transaction, set-wise: failures, then processed rows inserted in
 * msg_id order (a fixed lock order across hosts) with ON CONFLICT DO NOTHING, then duplicates
 * for the rest, then every claim marked committed. Within a batch the first delivery of a
 * msg_id (in batch order) wins, as in a sequential run.
 */
export async function commitBatch(
  tx: TransactionSQL,
  root: string,
  ownerId: string,
  all: readonly Outcome[],
  now: string,
  effect: PostgresEffect | undefined,
): Promise<Verdict[]> {
  const verdicts = new Map<string, Verdict>()
  // The fence, first: each claim is marked committed only if this owner still holds it
  // (its row lock then keeps a takeover out until this transaction ends). An outcome whose
  // claim another consumer took over, after this one's lease ran out, records nothing.
  // The rows are found through the primary key (name = ANY), as in claim: left to join the
  // list, the planner misjudges the owner filter and rescans claims, dead rows and all,
  // for every file (4x slower); an owner_id = condition would bitmap-scan the
  // (owner_id, state) index full of dead entries instead.
  const marks = all.flatMap((o) =>
    o.kind === "vanished"
      ? []
      : [
          {
            name: o.name,
            claim_id: o.claimId,
            dest: o.kind === "rejected" ? "error" : "done",
            dest_name: o.kind === "rejected" ? o.destName : null,
            hash: o.hash,
          },
        ],
  )
  const committed =
    marks.length === 0
      ? []
      : await tx`
          UPDATE claims c SET state = 'committed', dest = t.dest, dest_name = t.dest_name, payload_hash = t.hash
          FROM jsonb_to_recordset(${marks}::jsonb) AS t(name text, claim_id text, dest text, dest_name text, hash text)
          WHERE c.root_id = ${root} AND c.name = ANY (ARRAY(SELECT jsonb_array_elements(${marks}::jsonb) ->> 'name'))
            AND c.name = t.name AND c.claim_id = t.claim_id AND c.owner_id IS NOT DISTINCT FROM ${ownerId}
          RETURNING c.claim_id`
  const gone = all.flatMap((o) => (o.kind === "vanished" ? [{ name: o.name, claim_id: o.claimId }] : []))
  const ended =
    gone.length === 0
      ? []
      : await tx`
          DELETE FROM claims c USING jsonb_to_recordset(${gone}::jsonb) AS t(name text, claim_id text)
          WHERE c.root_id = ${root} AND c.name = ANY (ARRAY(SELECT jsonb_array_elements(${gone}::jsonb) ->> 'name'))
            AND c.name = t.name AND c.claim_id = t.claim_id AND c.owner_id IS NOT DISTINCT FROM ${ownerId}
          RETURNING c.claim_id`
  const owned = new Set([...committed, ...ended].map((r) => (r as { claim_id: string }).claim_id))
  for (const o of all)
    if (!owned.has(o.claimId)) verdicts.set(o.claimId, "lost")
    else if (o.kind === "vanished") verdicts.set(o.claimId, "vanished")
  const outcomes = all.filter((o) => o.kind !== "vanished" && owned.has(o.claimId))
  const accepted = outcomes.flatMap((o, ord) =>
    o.kind === "accepted"
      ? [
          {
            ord,
            name: o.name,
            claim_id: o.claimId,
            msg_id: o.msgId,
            order_no: o.orderNo,
            seq: o.seq,
            amount: o.amount,
            hash: o.hash,
            content_hash: o.contentHash,
          },
        ]
      : [],
  )
  const failures: {
    file: string
    original: string
    reason: string
    detail: string
    hash: string | null
    claim_id: string
  }[] = []
  for (const o of outcomes)
    if (o.kind === "rejected") {
      failures.push({
        file: o.destName,
        original: o.name,
        reason: o.reason,
        detail: o.detail,
        hash: o.hash,
        claim_id: o.claimId,
      })
      verdicts.set(o.claimId, "rejected")
    }

  // Beyond the deduplication horizon: unknown msg_id at or below its order's pruned seq.
  if (accepted.length > 0) {
    const [h] = await tx`SELECT EXISTS (SELECT 1 FROM horizon) AS any`
    if (h?.any) {
      const beyond = await tx`
        SELECT t.claim_id, t.name, t.hash, t.seq, t.order_no, h.max_seq
        FROM jsonb_to_recordset(${accepted}::jsonb) AS t(claim_id text, name text, hash text, msg_id text, order_no text, seq bigint)
        JOIN horizon h ON h.order_no = t.order_no
        WHERE t.seq <= h.max_seq AND NOT EXISTS (SELECT 1 FROM processed p WHERE p.msg_id = t.msg_id)`
      for (const b of beyond as {
        claim_id: string
        name: string
        hash: string
        seq: string
        order_no: string
        max_seq: string
      }[]) {
        verdicts.set(b.claim_id, "beyond-horizon")
        failures.push({
          file: b.name,
          original: b.name,
          reason: "beyond-horizon",
          detail: beyondHorizon(b.seq, b.max_seq, b.order_no),
          hash: b.hash,
          claim_id: b.claim_id,
        })
      }
    }
  }
  const candidates = accepted.filter((a) => !verdicts.has(a.claim_id))
  if (candidates.length > 0) {
    const inserted = await tx`
      INSERT INTO processed (msg_id, order_no, seq, amount, file, root_id, payload_hash, content_hash, claim_id, processed_at)
      SELECT t.msg_id, t.order_no, t.seq, t.amount, t.name, ${root}, t.hash, t.content_hash, t.claim_id, ${now}
      FROM jsonb_to_recordset(${candidates}::jsonb)
        AS t(ord bigint, name text, claim_id text, msg_id text, order_no text, seq bigint, amount text, hash text, content_hash text)
      ORDER BY t.msg_id COLLATE "C", t.ord
      ON CONFLICT (msg_id) DO NOTHING
      RETURNING claim_id`
    for (const r of inserted as { claim_id: string }[]) verdicts.set(r.claim_id, "processed")
    if (effect !== undefined) {
      for (const o of outcomes) {
        if (o.kind !== "accepted" || verdicts.get(o.claimId) !== "processed") continue
        try {
          await tx.savepoint(async (sp) => {
            await effect(o, sp)
          })
        } catch (error) {
          await tx`DELETE FROM processed WHERE claim_id = ${o.claimId}`
          verdicts.set(o.claimId, "handler-rejected")
          failures.push({
            file: o.name,
            original: o.name,
            reason: "handler",
            detail: error instanceof Error ? error.message : String(error),
            hash: o.hash,
            claim_id: o.claimId,
          })
        }
      }
    }
    const dups = candidates.filter((a) => !verdicts.has(a.claim_id))
    if (dups.length > 0) {
      const recorded = await tx`
        INSERT INTO duplicates (msg_id, file, root_id, payload_hash, content_hash, is_conflict, claim_id, seen_at)
        SELECT t.msg_id, t.name, ${root}, t.hash, t.content_hash,
               CASE WHEN p.content_hash IS DISTINCT FROM t.content_hash THEN 1 ELSE 0 END, t.claim_id, ${now}
        FROM jsonb_to_recordset(${dups}::jsonb)
          AS t(ord bigint, name text, claim_id text, msg_id text, hash text, content_hash text)
        LEFT JOIN processed p ON p.msg_id = t.msg_id
        ORDER BY t.ord
        RETURNING claim_id, is_conflict`
      for (const r of recorded as { claim_id: string; is_conflict: number }[])
        verdicts.set(r.claim_id, r.is_conflict ? "conflict" : "duplicate")
    }
  }
  // A detail is free text (a parser's message, an effect's error): made storable, or one
  // U+0000 in it would abort the whole batch's commit.
  for (const f of failures) f.detail = toStorableText(f.detail)
  if (failures.length > 0)
    await tx`
      INSERT INTO failures (root_id, file, original, reason, detail, payload_hash, claim_id, failed_at)
      SELECT ${root}, t.file, t.original, t.reason, t.detail, t.hash, t.claim_id, ${now}
      FROM jsonb_to_recordset(${failures}::jsonb)
        AS t(file text, original text, reason text, detail text, hash text, claim_id text)`
  // Accepted messages the ledger refused after all (the effect threw, or beyond the
  // horizon) go to error/ under their own name: their claims say so.
  const refused = outcomes.flatMap((o) => {
    const v = verdicts.get(o.claimId)
    return o.kind === "accepted" && (v === "handler-rejected" || v === "beyond-horizon")
      ? [{ name: o.name, claim_id: o.claimId }]
      : []
  })
  if (refused.length > 0)
    await tx`
      UPDATE claims c SET dest = 'error', dest_name = t.name
      FROM jsonb_to_recordset(${refused}::jsonb) AS t(name text, claim_id text)
      WHERE c.root_id = ${root} AND c.name = t.name AND c.claim_id = t.claim_id`
  return all.map((o) => verdicts.get(o.claimId) ?? "processed")
}
