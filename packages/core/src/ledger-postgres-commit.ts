// The PostgreSQL ledger's batch commit: the questions of the verdict rules (ledger-verdicts.ts)
// asked set-wise, a few statements for a whole batch, inside the transaction
// PostgresLedger.commit opens (and retries whole on deadlock or serialization failure), and the
// rows the Judgement decides written.
import type { TransactionSQL } from "bun"
import type { PostgresEffect } from "./ledger-postgres.ts"
import { statements } from "./ledger-statements.ts"
import type { AcceptedOutcome, Outcome, Verdict } from "./ledger-types.ts"
import { destinationOf, Judgement, resultText } from "./ledger-verdicts.ts"

/**
 * Commits a batch in one transaction: every claim marked (the fence), then processed rows
 * inserted in msg_id order (a fixed lock order across hosts) with ON CONFLICT DO NOTHING, then
 * duplicates and failures. Within a batch the first delivery of a msg_id (in batch order) wins,
 * as in a sequential run.
 */
export async function commitBatch(
  tx: TransactionSQL,
  root: string,
  ownerId: string,
  all: readonly Outcome[],
  now: string,
  effect: PostgresEffect | undefined,
): Promise<Verdict[]> {
  const j = new Judgement(all)
  const held = await fence(tx, root, ownerId, all)
  for (const o of all) j.fence(o, held.has(o.claimId))
  await horizon(tx, j)
  for (let round = j.nextRound(); round.length > 0; round = j.nextRound()) {
    const rows = round.map((o, ord) => ({
      ord,
      name: o.name,
      claim_id: o.claimId,
      msg_id: o.msgId,
      order_no: o.orderNo,
      seq: o.seq,
      amount: o.amount,
      hash: o.hash,
      content_hash: o.contentHash,
    }))
    const inserted = new Set(
      (
        (await tx`
          INSERT INTO processed (msg_id, order_no, seq, amount, file, root_id, payload_hash, content_hash, claim_id, processed_at)
          SELECT t.msg_id, t.order_no, t.seq, t.amount, t.name, ${root}, t.hash, t.content_hash, t.claim_id, ${now}
          FROM jsonb_to_recordset(${rows}::jsonb)
            AS t(ord bigint, name text, claim_id text, msg_id text, order_no text, seq bigint, amount text, hash text, content_hash text)
          ORDER BY t.msg_id COLLATE "C", t.ord
          ON CONFLICT (msg_id) DO NOTHING
          RETURNING claim_id`) as { claim_id: string }[]
      ).map((r) => r.claim_id),
    )
    const refused: AcceptedOutcome[] = []
    for (const o of round) {
      if (!inserted.has(o.claimId)) refused.push(o)
      else if (effect === undefined) j.inserted(o)
      else await runEffect(tx, j, o, effect)
    }
    if (refused.length === 0) continue
    // The processed row each refused delivery repeats, read after the effects: a row whose
    // effect failed is gone, and its key free for the next round.
    const firsts = new Map(
      (
        (await tx`
          SELECT msg_id, content_hash FROM processed
          WHERE msg_id = ANY (ARRAY(SELECT jsonb_array_elements_text(${refused.map((o) => o.msgId)}::jsonb)))`) as {
          msg_id: string
          content_hash: string
        }[]
      ).map((r) => [r.msg_id, r.content_hash]),
    )
    for (const o of refused) j.refused(o, firsts.get(o.msgId))
  }
  if (j.duplicates.length > 0) {
    const dups = j.duplicates.map((d, ord) => ({
      ord,
      msg_id: d.outcome.msgId,
      name: d.outcome.name,
      hash: d.outcome.hash,
      content_hash: d.outcome.contentHash,
      is_conflict: d.isConflict ? 1 : 0,
      claim_id: d.outcome.claimId,
    }))
    await tx`
      INSERT INTO duplicates (msg_id, file, root_id, payload_hash, content_hash, is_conflict, claim_id, seen_at)
      SELECT t.msg_id, t.name, ${root}, t.hash, t.content_hash, t.is_conflict, t.claim_id, ${now}
      FROM jsonb_to_recordset(${dups}::jsonb)
        AS t(ord bigint, msg_id text, name text, hash text, content_hash text, is_conflict integer, claim_id text)
      ORDER BY t.ord`
  }
  if (j.failures.length > 0) {
    const failures = j.failures.map((f, ord) => ({
      ord,
      file: f.file,
      original: f.original,
      reason: f.reason,
      detail: f.detail,
      hash: f.hash,
      claim_id: f.claimId,
    }))
    await tx`
      INSERT INTO failures (root_id, file, original, reason, detail, payload_hash, claim_id, failed_at)
      SELECT ${root}, t.file, t.original, t.reason, t.detail, t.hash, t.claim_id, ${now}
      FROM jsonb_to_recordset(${failures}::jsonb)
        AS t(ord bigint, file text, original text, reason text, detail text, hash text, claim_id text)
      ORDER BY t.ord`
  }
  const redirected = j.redirected().map((o) => ({ name: o.name, claim_id: o.claimId }))
  if (redirected.length > 0)
    await tx`
      UPDATE claims c SET dest = 'error', dest_name = t.name
      FROM jsonb_to_recordset(${redirected}::jsonb) AS t(name text, claim_id text)
      WHERE c.root_id = ${root} AND c.name = t.name AND c.claim_id = t.claim_id`
  return j.verdicts()
}

/**
 * The fence: each claim is marked committed (a vanished file's deleted) only if `ownerId` still
 * holds it, and its row lock then keeps a takeover out until this transaction ends. Returns the
 * claim ids it found held. The rows are found through the primary key (name = ANY), as in
 * claim: left to join the list, the planner misjudges the owner filter and rescans claims, dead
 * rows and all, for every file (4x slower); an owner_id = condition would bitmap-scan the
 * (owner_id, state) index full of dead entries instead.
 */
async function fence(tx: TransactionSQL, root: string, ownerId: string, all: readonly Outcome[]): Promise<Set<string>> {
  const marks = all.flatMap((o) => {
    if (o.kind === "vanished") return []
    const { dest, destName } = destinationOf(o)
    return [{ name: o.name, claim_id: o.claimId, dest, dest_name: destName, hash: o.hash }]
  })
  const gone = all.flatMap((o) => (o.kind === "vanished" ? [{ name: o.name, claim_id: o.claimId }] : []))
  const committed =
    marks.length === 0
      ? []
      : await tx`
          UPDATE claims c SET state = 'committed', dest = t.dest, dest_name = t.dest_name, payload_hash = t.hash
          FROM jsonb_to_recordset(${marks}::jsonb) AS t(name text, claim_id text, dest text, dest_name text, hash text)
          WHERE c.root_id = ${root} AND c.name = ANY (ARRAY(SELECT jsonb_array_elements(${marks}::jsonb) ->> 'name'))
            AND c.name = t.name AND c.claim_id = t.claim_id AND c.owner_id IS NOT DISTINCT FROM ${ownerId}
          RETURNING c.claim_id`
  const ended =
    gone.length === 0
      ? []
      : await tx`
          DELETE FROM claims c USING jsonb_to_recordset(${gone}::jsonb) AS t(name text, claim_id text)
          WHERE c.root_id = ${root} AND c.name = ANY (ARRAY(SELECT jsonb_array_elements(${gone}::jsonb) ->> 'name'))
            AND c.name = t.name AND c.claim_id = t.claim_id AND c.owner_id IS NOT DISTINCT FROM ${ownerId}
          RETURNING c.claim_id`
  return new Set([...committed, ...ended].map((r) => (r as { claim_id: string }).claim_id))
}

/** The horizon's answers for the undecided accepted outcomes whose orders compact has pruned. */
async function horizon(tx: TransactionSQL, j: Judgement): Promise<void> {
  const accepted = j.undecided()
  if (accepted.length === 0) return
  const [h] = await tx`SELECT EXISTS (SELECT 1 FROM horizon) AS any`
  if (!h?.any) return
  const rows = accepted.map((o) => ({ claim_id: o.claimId, msg_id: o.msgId, order_no: o.orderNo }))
  const found = new Map(
    (
      (await tx`
        SELECT t.claim_id, h.max_seq, EXISTS (SELECT 1 FROM processed p WHERE p.msg_id = t.msg_id) AS known
        FROM jsonb_to_recordset(${rows}::jsonb) AS t(claim_id text, msg_id text, order_no text)
        JOIN horizon h ON h.order_no = t.order_no`) as { claim_id: string; max_seq: string; known: boolean }[]
    ).map((r) => [r.claim_id, r]),
  )
  for (const o of accepted) {
    const f = found.get(o.claimId)
    if (f !== undefined) j.horizon(o, f.max_seq, f.known)
  }
}

/** Runs the effect of an inserted outcome in a savepoint; when it throws, its processed row goes too. */
async function runEffect(tx: TransactionSQL, j: Judgement, o: AcceptedOutcome, effect: PostgresEffect): Promise<void> {
  try {
    await tx.savepoint(async (sp) => {
      const result = resultText(await effect(o, sp))
      if (result !== undefined) await sp.unsafe(statements.storeResult, [result, o.msgId])
    })
    j.inserted(o)
  } catch (error) {
    await tx`DELETE FROM processed WHERE claim_id = ${o.claimId}`
    j.effectFailed(o, error)
  }
}
