// The PostgreSQL ledger's claim rows: taking a batch of names, listing every claim of a root
// for recovery, and taking dead owners' claims over. PostgresLedger's methods call these.
import type { SQL, TransactionSQL } from "bun"
import { type AdoptedRow, adopted, type Claim, type ClaimRow, type RawClaimRow, toClaimRow } from "../model.ts"
import { pgArray, someOf } from "./arrays.ts"
import * as lease from "./lease.ts"
import type { PostgresLedger } from "./ledger.ts"

/**
 * Claims those of `rows` nobody holds in this root, each under its new claim id, and forgets
 * `forget` (committed claims whose files have left), in one transaction, in which `andThen`
 * writes what goes with the claims taken. Returns the claims taken in the caller's order.
 * `isLazy` commits without waiting for the WAL flush (see below); otherwise durably.
 */
export function claim(
  l: PostgresLedger,
  ownerId: string,
  rows: readonly { readonly name: string; readonly claim_id: string }[],
  now: string,
  forget: readonly Claim[],
  andThen?: (tx: TransactionSQL, taken: readonly Claim[]) => Promise<void>,
  isLazy = false,
): Promise<Claim[]> {
  const gone = pgArray(forget.map((c) => c.name))
  l.vacuum.forgot(forget.length)
  const names = pgArray(rows.map((r) => r.name))
  const ids = pgArray(rows.map((r) => r.claim_id))
  // Every statement of a claim without `andThen` goes out with BEGIN and COMMIT: one round trip.
  const statements = (q: SQL) => [
    // Lazily, a claim of files already in the queue does not wait for its WAL flush: the rows
    // need to be on disk only before the commit of their outcomes, and that commit's flush
    // (synchronous_commit on) writes every earlier WAL record with its own. A crash of the
    // server or a power cut before it can lose these rows; the files then sit in processing/
    // with no claim, and recovery claims and processes them as orphans, which is right because
    // nothing about them was committed. One WAL flush per batch saved. A landed claim is never
    // lazy: see claimLanded.
    isLazy ? q`SET LOCAL synchronous_commit = off` : undefined,
    // Found through the primary key: `name = ANY` of an array parameter is an index condition,
    // or a hashed filter. A name's claim row is unique while it exists, so the name, this owner
    // and the committed state identify the very claim that was moved.
    forget.length > 0
      ? q`
        DELETE FROM claims
        WHERE root_id = ${l.rootId} AND name = ANY (${gone}::text[]) AND owner_id = ${ownerId} AND state = 'committed'`
      : undefined,
    q.unsafe(lease.heartbeat, [ownerId]),
    // Inserted in name order (one lock order for every consumer of the root), numbered in the
    // caller's order: seq_no is the claim order recovery redoes a crashed batch in, and it must
    // be the order the batch is processed in, or a retry could let another delivery of a
    // msg_id win. nextval in the sorted subquery runs after its sort, so it counts in `ord`;
    // its sequence is looked up once (an InitPlan), not for every row. The answer is one row
    // (see someOf).
    q`
      WITH taken AS (
        INSERT INTO claims (root_id, name, seq_no, claim_id, owner_id, attempts, state, claimed_at)
        OVERRIDING SYSTEM VALUE
        SELECT ${l.rootId}, n.name, n.seq_no, n.claim_id, ${ownerId}, 1, 'claimed', ${now}
        FROM (
          SELECT t.name, t.claim_id, nextval((SELECT pg_get_serial_sequence('claims', 'seq_no')::regclass)) AS seq_no
          FROM unnest(${names}::text[], ${ids}::text[]) WITH ORDINALITY AS t(name, claim_id, ord)
          ORDER BY t.ord
        ) n
        ORDER BY n.name
        ON CONFLICT (root_id, name) DO NOTHING
        RETURNING claim_id
      )
      SELECT CASE WHEN count(*) = ${rows.length} THEN NULL ELSE COALESCE(array_agg(claim_id), '{}') END AS some FROM taken`,
  ]
  const takenOf = (answer: unknown): Claim[] => {
    const some = someOf(answer as unknown[])
    const inserted = some === undefined ? undefined : new Set(some)
    // Keep the caller's (directory) order.
    return rows
      .filter((r) => inserted === undefined || inserted.has(r.claim_id))
      .map((r) => ({ name: r.name, claimId: r.claim_id, attempts: 1 }))
  }
  if (andThen === undefined) return l.pipelined(statements).then((answers) => takenOf(answers.at(-1)))
  return l.transaction(async (tx) => {
    const taken = takenOf((await inOrder(statements(tx))).at(-1))
    await andThen(tx, taken)
    return taken
  })
}

/**
 * Sends `queries` on the transaction's connection together (one round trip) and returns what
 * each returned, undefined for an undefined one, once every one has ended. The server runs them
 * one after the other in the order sent; the first failure aborts the transaction, and is what
 * is thrown.
 */
export async function inOrder(queries: readonly (PromiseLike<unknown> | undefined)[]): Promise<unknown[]> {
  const settled = await Promise.allSettled(queries)
  const failed = settled.find((r) => r.status === "rejected")
  if (failed !== undefined) throw failed.reason
  return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value)
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
  const names = pgArray(rows.map((r) => r.name))
  const taken = (await l.transaction(
    (tx) => tx`
      UPDATE claims c SET owner_id = ${ownerId}
      FROM unnest(${names}::text[], ${pgArray(rows.map((r) => r.claimId))}::text[], ${pgArray(rows.map((r) => r.ownerId))}::text[])
        AS t(name, claim_id, owner_id)
      WHERE c.root_id = ${l.rootId} AND c.name = ANY (${names}::text[]) AND c.name = t.name AND c.claim_id = t.claim_id
        AND c.owner_id IS NOT DISTINCT FROM t.owner_id
      RETURNING c.claim_id, c.attempts, c.state, c.dest, c.dest_name, COALESCE(c.payload_hash,
        (SELECT p.payload_hash FROM processed p WHERE p.claim_id = c.claim_id),
        (SELECT d.payload_hash FROM duplicates d WHERE d.claim_id = c.claim_id)) AS payload_hash`,
  )) as (AdoptedRow & Pick<RawClaimRow, "claim_id">)[]
  const current = new Map(taken.map((r) => [r.claim_id, r]))
  return rows.flatMap((r): ClaimRow[] => {
    const t = current.get(r.claimId)
    return t === undefined ? [] : [{ ...r, ownerId, ...adopted(t) }]
  })
}
