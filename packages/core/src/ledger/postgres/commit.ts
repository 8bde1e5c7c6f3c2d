// The PostgreSQL ledger's batch commit: the questions of the verdict rules (../verdicts.ts)
// asked set-wise, a few statements for a whole batch, inside the transaction
// PostgresLedger.commit opens (and retries whole on deadlock or serialization failure), and the
// rows the Judgement decides written.
import type { TransactionSQL } from "bun"
import { fault } from "../../_fault.ts"
import { alternateName } from "../../queue/names.ts"
import { type DeferPolicy, isTransient } from "../../transient.ts"
import type { AcceptedOutcome, Outcome, Verdict } from "../model.ts"
import { statements } from "../statements.ts"
import { destinationOf, Judgement, type PriorDeferral, resultText } from "../verdicts.ts"
import { isSessionLimit } from "./errors.ts"
import type { PostgresEffect } from "./ledger.ts"

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
  policy?: DeferPolicy,
): Promise<Verdict[]> {
  const j = new Judgement(all, now, policy)
  const held = await fence(tx, root, ownerId, all)
  for (const o of all) j.fence(o, held.has(o.claimId))
  await horizon(tx, j)
  fault("in-commit")
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
      else await runEffect(tx, root, j, o, effect)
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
  await deferrals(tx, root, j)
  return j.verdicts()
}

/**
 * Step 5: the held claims' picked-up deferrals rows closed (one indexed statement per batch),
 * and the new deferrals written, each claim pointed at deferred/ under the row's name: a
 * picked-up file's own, a first deferral's first name no other deferred file has.
 */
async function deferrals(tx: TransactionSQL, root: string, j: Judgement): Promise<void> {
  const closed = j.closed()
  if (closed.length > 0)
    await tx`
      DELETE FROM deferrals
      WHERE root_id = ${root} AND claim_id = ANY (ARRAY(SELECT jsonb_array_elements_text(${closed}::jsonb)))`
  for (const d of j.deferrals) {
    const o = d.outcome
    let file = o.name
    for (let k = 1; !d.isPickedUp; k++) {
      const [taken] = await tx`SELECT 1 AS one FROM deferrals WHERE root_id = ${root} AND file = ${file}`
      if (taken === undefined) break
      file = alternateName(o.name, k)
    }
    await tx`
      INSERT INTO deferrals (root_id, file, msg_id, attempts, first_deferred_at, next_attempt_at, last_error, payload_hash, claim_id)
      VALUES (${root}, ${file}, ${o.msgId}, ${d.attempts}, ${d.firstDeferredAt}, ${d.nextAttemptAt}, ${d.lastError}, ${o.hash}, ${o.claimId})
      ON CONFLICT (root_id, file) DO UPDATE SET msg_id = excluded.msg_id, attempts = excluded.attempts,
        first_deferred_at = excluded.first_deferred_at, next_attempt_at = excluded.next_attempt_at,
        last_error = excluded.last_error, payload_hash = excluded.payload_hash, claim_id = excluded.claim_id`
    await tx`
      UPDATE claims SET dest = 'deferred', dest_name = ${file}
      WHERE root_id = ${root} AND name = ${o.name} AND claim_id = ${o.claimId}`
  }
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

/**
 * The horizon lock orders a commit against a compact that prunes keys. The horizon check and
 * the processed inserts are separate statements at READ COMMITTED: a prune committed between
 * them would leave a redelivery judged against keys that are gone (not beyond the horizon, its
 * key free), and its effect applied twice. So a commit takes this lock in share mode before it
 * asks the horizon and holds it to its end, and compact takes it exclusively before it raises
 * the horizon and prunes: a commit's horizon and inserts see either no part of a prune or all of
 * it. Commits never wait for each other; only while a compact prunes do they wait. SQLite needs
 * no such lock: its writers take the one write lock at BEGIN.
 */
export const HORIZON_LOCK = 7_270_002

/** The horizon's answers for the undecided accepted outcomes whose orders compact has pruned. */
async function horizon(tx: TransactionSQL, j: Judgement): Promise<void> {
  const accepted = j.undecided()
  if (accepted.length === 0) return
  // A statement of its own: a READ COMMITTED statement reads the snapshot taken as it starts,
  // so the horizon must be read by a later statement than the one that waited for the lock.
  await tx`SELECT pg_advisory_xact_lock_shared(${HORIZON_LOCK})`
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
async function runEffect(
  tx: TransactionSQL,
  root: string,
  j: Judgement,
  o: AcceptedOutcome,
  effect: PostgresEffect,
): Promise<void> {
  try {
    await tx.savepoint(async (sp) => {
      const result = resultText(await effect(o, sp))
      if (result !== undefined) await sp.unsafe(statements.storeResult, [result, o.msgId])
    })
    j.inserted(o)
  } catch (error) {
    // The session's own limits (a lock held past the busy timeout, a statement timeout) are
    // the database's state, not the message's fault: the batch fails and its files go back.
    if (isSessionLimit(error)) throw error
    await tx`DELETE FROM processed WHERE claim_id = ${o.claimId}`
    let prior: PriorDeferral | undefined
    if (isTransient(error)) {
      const [r] = await tx`
        SELECT attempts, first_deferred_at FROM deferrals WHERE root_id = ${root} AND claim_id = ${o.claimId}`
      if (r !== undefined) prior = { attempts: Number(r.attempts), firstDeferredAt: r.first_deferred_at as string }
    }
    j.effectFailed(o, error, prior)
  }
}
