// The PostgreSQL ledger's batch commit: the questions of the verdict rules (../verdicts.ts)
// asked set-wise, a few statements for a whole batch, inside the transaction
// PostgresLedger.commit opens (and retries whole on deadlock or serialization failure), and the
// rows the Judgement decides written.
import type { TransactionSQL } from "bun"
import { fault } from "../../_fault.ts"
import { alternateName } from "../../queue/names.ts"
import { type DeferPolicy, isTransient } from "../../transient.ts"
import { type AcceptedOutcome, claimRecord, type Outcome, type Verdict } from "../model.ts"
import { statements } from "../statements.ts"
import { destinationOf, Judgement, type PriorDeferral, resultText } from "../verdicts.ts"
import { pgArray, someOf } from "./arrays.ts"
import { inOrder } from "./claims.ts"
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
  const { held, isHorizonSet } = await fence(tx, root, ownerId, all)
  for (const o of all) j.fence(o, held.has(o.claimId))
  if (isHorizonSet) await horizon(tx, j)
  fault("in-commit")
  for (let round = j.nextRound(); round.length > 0; round = j.nextRound()) {
    const some = someOf(
      await tx`
        WITH inserted AS (
          INSERT INTO processed (msg_id, order_no, seq, amount, file, root_id, payload_hash, content_hash, claim_id, processed_at)
          SELECT t.msg_id, t.order_no, t.seq, t.amount, t.name, ${root}, t.hash, t.content_hash, t.claim_id, ${now}
          FROM unnest(${pgArray(round.map((o) => o.name))}::text[], ${pgArray(round.map((o) => o.claimId))}::text[],
            ${pgArray(round.map((o) => o.msgId))}::text[], ${pgArray(round.map((o) => o.orderNo))}::text[],
            ${pgArray(round.map((o) => o.seq))}::bigint[], ${pgArray(round.map((o) => o.amount))}::text[],
            ${pgArray(round.map((o) => o.hash))}::text[], ${pgArray(round.map((o) => o.contentHash))}::text[])
            WITH ORDINALITY AS t(name, claim_id, msg_id, order_no, seq, amount, hash, content_hash, ord)
          ORDER BY t.msg_id COLLATE "C", t.ord
          ON CONFLICT (msg_id) DO NOTHING
          RETURNING claim_id
        )
        SELECT CASE WHEN count(*) = ${round.length} THEN NULL ELSE COALESCE(array_agg(claim_id), '{}') END AS some FROM inserted`,
    )
    const inserted = some === undefined ? undefined : new Set(some)
    const refused: AcceptedOutcome[] = []
    for (const o of round) {
      if (inserted !== undefined && !inserted.has(o.claimId)) refused.push(o)
      else if (effect === undefined) j.inserted(o)
      else await runEffect(tx, root, j, o, effect)
    }
    if (refused.length === 0) continue
    // The processed row each refused delivery repeats, read after the effects: a row whose
    // effect failed is gone, and its key free for the next round.
    const firsts = new Map(
      (
        (await tx`
          SELECT msg_id, content_hash FROM processed WHERE msg_id = ANY (${pgArray(refused.map((o) => o.msgId))}::text[])`) as {
          msg_id: string
          content_hash: string
        }[]
      ).map((r) => [r.msg_id, r.content_hash]),
    )
    for (const o of refused) j.refused(o, firsts.get(o.msgId))
  }
  const dups = j.duplicates.map((d) => d.outcome)
  const failures = j.failures
  const redirected = j.redirected()
  const closed = j.closed()
  // The rows the Judgement decided, sent together: one round trip, run in this order.
  await inOrder([
    dups.length > 0
      ? tx`
        INSERT INTO duplicates (msg_id, file, root_id, payload_hash, content_hash, is_conflict, claim_id, seen_at)
        SELECT t.msg_id, t.name, ${root}, t.hash, t.content_hash, t.is_conflict, t.claim_id, ${now}
        FROM unnest(${pgArray(dups.map((o) => o.msgId))}::text[], ${pgArray(dups.map((o) => o.name))}::text[],
          ${pgArray(dups.map((o) => o.hash))}::text[], ${pgArray(dups.map((o) => o.contentHash))}::text[],
          ${pgArray(j.duplicates.map((d) => (d.isConflict ? 1 : 0)))}::integer[], ${pgArray(dups.map((o) => o.claimId))}::text[])
          WITH ORDINALITY AS t(msg_id, name, hash, content_hash, is_conflict, claim_id, ord)
        ORDER BY t.ord`
      : undefined,
    failures.length > 0
      ? tx`
        INSERT INTO failures (root_id, file, original, reason, detail, payload_hash, claim_id, failed_at)
        SELECT ${root}, t.file, t.original, t.reason, t.detail, t.hash, t.claim_id, ${now}
        FROM unnest(${pgArray(failures.map((f) => f.file))}::text[], ${pgArray(failures.map((f) => f.original))}::text[],
          ${pgArray(failures.map((f) => f.reason))}::text[], ${pgArray(failures.map((f) => f.detail))}::text[],
          ${pgArray(failures.map((f) => f.hash))}::text[], ${pgArray(failures.map((f) => f.claimId))}::text[])
          WITH ORDINALITY AS t(file, original, reason, detail, hash, claim_id, ord)
        ORDER BY t.ord`
      : undefined,
    // Step 5's first half: the held claims' picked-up deferrals rows closed (one indexed
    // statement per batch).
    closed.length > 0
      ? tx`DELETE FROM deferrals WHERE root_id = ${root} AND claim_id = ANY (${pgArray(closed)}::text[])`
      : undefined,
    redirected.length > 0
      ? tx`
        UPDATE claims c SET dest = 'error', dest_name = t.name
        FROM unnest(${pgArray(redirected.map((o) => o.name))}::text[], ${pgArray(redirected.map((o) => o.claimId))}::text[])
          AS t(name, claim_id)
        WHERE c.root_id = ${root} AND c.name = ANY (${pgArray(redirected.map((o) => o.name))}::text[])
          AND c.name = t.name AND c.claim_id = t.claim_id`
      : undefined,
  ])
  await deferrals(tx, root, j)
  return j.verdicts()
}

/**
 * Step 5's second half: the new deferrals written, each claim pointed at deferred/ under the
 * row's name: a picked-up file's own, a first deferral's first name no other deferred file has.
 */
async function deferrals(tx: TransactionSQL, root: string, j: Judgement): Promise<void> {
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
 * claim ids it found held. The rows are found through the primary key (`name = ANY` of the
 * batch's names, hashed in a plan made for those values: see sessionSettings), never through an
 * owner condition, and both statements go out in one round trip.
 */
async function fence(
  tx: TransactionSQL,
  root: string,
  ownerId: string,
  all: readonly Outcome[],
): Promise<{ held: Set<string>; isHorizonSet: boolean }> {
  const marked: Outcome[] = []
  const dests: string[] = []
  const destNames: (string | null)[] = []
  const hashes: (string | null)[] = []
  const gone: Outcome[] = []
  for (const o of all) {
    if (o.kind === "vanished") {
      gone.push(o)
      continue
    }
    const { dest, destName } = destinationOf(o)
    marked.push(o)
    dests.push(dest)
    destNames.push(destName)
    hashes.push(claimRecord(o))
  }
  const names = pgArray(marked.map((o) => o.name))
  const goneNames = pgArray(gone.map((o) => o.name))
  const isAccepting = marked.some((o) => o.kind === "accepted")
  // Each answers in one row (see someOf): NULL when every claim was held, the usual case. The
  // horizon's lock and question go with them (see horizon), for a batch with a message to judge.
  const [committed, ended, , horizonSet] = await inOrder([
    marked.length === 0
      ? undefined
      : tx`
          WITH held AS (
            UPDATE claims c SET state = 'committed', dest = t.dest, dest_name = t.dest_name, payload_hash = t.hash
            FROM unnest(${names}::text[], ${pgArray(marked.map((o) => o.claimId))}::text[], ${pgArray(dests)}::text[],
              ${pgArray(destNames)}::text[], ${pgArray(hashes)}::text[]) AS t(name, claim_id, dest, dest_name, hash)
            WHERE c.root_id = ${root} AND c.name = ANY (${names}::text[])
              AND c.name = t.name AND c.claim_id = t.claim_id AND c.owner_id IS NOT DISTINCT FROM ${ownerId}
            RETURNING c.claim_id
          )
          SELECT CASE WHEN count(*) = ${marked.length} THEN NULL ELSE COALESCE(array_agg(claim_id), '{}') END AS some FROM held`,
    gone.length === 0
      ? undefined
      : tx`
          WITH held AS (
            DELETE FROM claims c USING unnest(${goneNames}::text[], ${pgArray(gone.map((o) => o.claimId))}::text[]) AS t(name, claim_id)
            WHERE c.root_id = ${root} AND c.name = ANY (${goneNames}::text[])
              AND c.name = t.name AND c.claim_id = t.claim_id AND c.owner_id IS NOT DISTINCT FROM ${ownerId}
            RETURNING c.claim_id
          )
          SELECT CASE WHEN count(*) = ${gone.length} THEN NULL ELSE COALESCE(array_agg(claim_id), '{}') END AS some FROM held`,
    // Statements of their own: a READ COMMITTED statement reads the snapshot taken as it
    // starts, so the horizon must be read by a later statement than the one that waited for
    // the lock.
    isAccepting ? tx`SELECT pg_advisory_xact_lock_shared(${HORIZON_LOCK})` : undefined,
    isAccepting ? tx`SELECT EXISTS (SELECT 1 FROM horizon) AS any` : undefined,
  ])
  const heldOf = (outcomes: readonly Outcome[], answer: unknown) => {
    const some = answer === undefined ? [] : someOf(answer as unknown[])
    return some === undefined ? outcomes.map((o) => o.claimId) : some
  }
  const isHorizonSet = (horizonSet as { any: boolean }[] | undefined)?.[0]?.any === true
  return { held: new Set([...heldOf(marked, committed), ...heldOf(gone, ended)]), isHorizonSet }
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

/**
 * The horizon's answers for the undecided accepted outcomes whose orders compact has pruned,
 * asked when the fence found the horizon set (it took HORIZON_LOCK first).
 */
async function horizon(tx: TransactionSQL, j: Judgement): Promise<void> {
  const accepted = j.undecided()
  if (accepted.length === 0) return
  const found = new Map(
    (
      (await tx`
        SELECT t.claim_id, h.max_seq, EXISTS (SELECT 1 FROM processed p WHERE p.msg_id = t.msg_id) AS known
        FROM unnest(${pgArray(accepted.map((o) => o.claimId))}::text[], ${pgArray(accepted.map((o) => o.msgId))}::text[],
          ${pgArray(accepted.map((o) => o.orderNo))}::text[]) AS t(claim_id, msg_id, order_no)
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
