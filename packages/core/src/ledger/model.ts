// The ledger's domain types, the same for both backends: a claim, an outcome and the verdict a
// commit gives it, and the rows both adapters select, with their mapping to the engine's types.
import { wallClock } from "../clock.ts"
import type { Owner } from "../queue/owner.ts"

/** A file a consumer has claimed. */
export interface Claim {
  readonly name: string
  readonly claimId: string
  readonly attempts: number
}

/** Where a landed delivery came from, as its origins row keeps it (text made storable). */
export interface LandedOrigin {
  readonly source: string
  readonly address: string
  readonly headers?: Readonly<Record<string, string>>
  readonly messageId?: string
}

/** The origin of a failure in error/ that a broker delivered, with the claim that failed it (a replay's identity). */
export interface FailureOrigin {
  readonly claimId: string
  readonly origin: LandedOrigin
}

/**
 * A broker delivery to be claimed as a file in processing/: its landed name, the attempts the
 * source has counted (its delivery count), the sha256 of its body, and its origin.
 */
export interface Landing {
  readonly name: string
  readonly attempts: number
  readonly payloadHash: string
  readonly deliveryId: string
  readonly origin: LandedOrigin
}

/** A landed (name, payload hash) pair as `committedLandings` answers it. */
export function landingKey(name: string, payloadHash: string): string {
  // A storable name holds no U+0000 (see storable-text.ts), so the pair cannot be spelt twice.
  return `${name}\u0000${payloadHash}`
}

/** Where a committed claim's file goes out of processing/. */
export type Destination = "done" | "error" | "deferred"

/** A claim as stored, with what is known of its owner. */
export interface ClaimRow extends Claim {
  readonly ownerId: string | null
  readonly state: "claimed" | "committed"
  readonly dest: Destination | null
  readonly destName: string | null
  /**
   * What tells the file a committed claim committed from a later file of its name: the sha256
   * of its bytes, stored with an error/ or deferred/ destination (for a claim adoptClaims
   * returns, also for done/, from its processed or duplicates row); for a file judged unread (a
   * symbolic link, say), its inode, size and time instead (queue/hash-file.ts, fileIdentity).
   * Null where neither is known.
   */
  readonly payloadHash: string | null
  readonly owner: (Owner & { readonly heartbeatAt: string; readonly heartbeatAgeMs: number }) | undefined
}

/** What the consumer decided for one claimed file, to be committed with its batch. */
export type Outcome =
  | {
      readonly kind: "accepted"
      readonly name: string
      readonly claimId: string
      readonly msgId: string
      readonly orderNo: string
      readonly seq: number
      readonly amount: string
      readonly hash: string
      /** sha256 of the message's canonical JSON: equal for the same content however it is formatted. */
      readonly contentHash: string
      /** The validated message, handed to the effect. */
      readonly message: unknown
    }
  | {
      readonly kind: "rejected"
      readonly name: string
      readonly claimId: string
      /** The name the file will have in error/ (chosen before commit so reports can join on it). */
      readonly destName: string
      readonly reason: string
      readonly detail: string
      readonly hash: string | null
      /**
       * For a file judged unread (no hash): its fileIdentity, which its claim row keeps in place
       * of a hash (see ClaimRow.payloadHash; `claimRecord`). Not part of the failure's history.
       */
      readonly identity?: string
    }
  | {
      /** The file left processing/ before it could be read: nothing to record but the claim's end. */
      readonly kind: "vanished"
      readonly name: string
      readonly claimId: string
    }

/** What a committed claim's row keeps of its file (ClaimRow.payloadHash): its hash, or else its identity. */
export function claimRecord(o: Exclude<Outcome, { kind: "vanished" }>): string | null {
  return o.hash ?? (o.kind === "rejected" ? (o.identity ?? null) : null)
}

/**
 * What the ledger made of an outcome. `handler-rejected`: the effect threw; `beyond-horizon`:
 * an unknown msg_id at or below its order's pruned seq (see compact). Both go to error/.
 * `deferred`: the effect threw a TransientError; a deferrals row says when to try again and the
 * file goes to deferred/. `expired`: it threw one past the policy's maximum age, and goes to
 * error/ as `expired`.
 * `lost`: the claim is no longer the committing consumer's (another one took it over after
 * this one's lease ran out), so nothing was recorded and the file is not this consumer's to
 * move. `vanished`: the consumer still held the claim but the file was gone; the claim is
 * deleted. Neither moves a file.
 */
export type Verdict =
  | "processed"
  | "duplicate"
  | "conflict"
  | "rejected"
  | "handler-rejected"
  | "beyond-horizon"
  | "deferred"
  | "expired"
  | "lost"
  | "vanished"

/** What compact removed from the ledger. */
export interface CompactSummary {
  readonly duplicates: number
  readonly failures: number
  readonly replays: number
  /** deletions rows: the record of files an operator deleted */
  readonly deletions: number
  /** origins rows of landed broker deliveries no longer needed (see statements.ts forgetOrigins) */
  readonly origins: number
  /** processed rows (idempotency keys) pruned past the horizon */
  readonly keys: number
}

/**
 * What the ledger made of a replay: recorded (the failure record marked, when there was one, the
 * replay logged and the file moved, all in one transaction), or refused because `maxReplays`
 * replays of the file were logged already (nothing recorded, nothing moved).
 */
/** The latest unreplayed failure recorded under a file name in error/: what replay decides by. */
export interface FailureRecord {
  readonly reason: string
  /** sha256 (hex) of the bytes as the consumer read them; null for a file never read (too-large, not-regular, symlink). */
  readonly payloadHash: string | null
  /** When the consumer recorded the failure (ISO 8601). */
  readonly failedAt: string
}

export type ReplayRecord =
  | { readonly kind: "replayed"; readonly isRecordMarked: boolean }
  | { readonly kind: "too-often"; readonly count: number }

/** Where `delete` removes files from: error/, or deferred/ when named explicitly. */
export type DeletionDir = "error" | "deferred"

/**
 * What a deletion's ledger half did: `deleted` with the failure reason it closed (error/) or the
 * deferred message's msg_id (deferred/), when the ledger had one; `in-use` when a consumer holds
 * the deferred file's claim right now (nothing was changed).
 */
export type DeletionRecord =
  | { readonly kind: "deleted"; readonly reason?: string; readonly msgId?: string }
  | { readonly kind: "in-use" }

/** A redelivery whose content differs from the processed message with the same msg_id. */
export interface ConflictRow {
  readonly msg_id: string
  readonly file: string
  readonly content_hash: string
  readonly processed_file: string
  readonly processed_content_hash: string
}

/** One row of the order check. */
export interface OrderProblem {
  readonly order_no: string
  readonly seq: number
  readonly problem: "duplicate" | "missing"
}

/** Order problems as ranges (sql/order-ranges.sql): a duplicated seq, or a run of missing ones. */
export interface OrderProblemRange {
  readonly order_no: string
  readonly first: number
  readonly last: number
  readonly problem: "duplicate" | "missing"
}

/** The order check read in one snapshot: the ranges, and order-check.sql's rows when they are few enough. */
export interface OrderCheck {
  readonly ranges: readonly OrderProblemRange[]
  /** order-check.sql's rows; absent when they would be more than the rows asked for. */
  readonly problems?: readonly OrderProblem[]
}

/** How many rows order-check.sql gives for these ranges: one per duplicated or missing seq. */
export const orderResultRows = (ranges: readonly OrderProblemRange[]): number =>
  ranges.reduce((n, r) => n + (r.last - r.first + 1), 0)

/** An accepted outcome, as an effect sees it. */
export type AcceptedOutcome = Extract<Outcome, { kind: "accepted" }>

/** A claims row joined with its owner, as both backends select it. */
export interface RawClaimRow {
  name: string
  claim_id: string
  owner_id: string | null
  attempts: number
  state: "claimed" | "committed"
  dest: Destination | null
  dest_name: string | null
  payload_hash: string | null
  host: string | null
  pid: number | null
  boot_id: string | null
  start_ticks: string | null
  heartbeat_at: string | null
  /** The heartbeat's age by the database server's clock, where the ledger has one (PostgreSQL). */
  heartbeat_age_ms?: number | null
}

/** The columns a takeover returns: the claim's state as the adopting transaction found it. */
export type AdoptedRow = Pick<RawClaimRow, "attempts" | "state" | "dest" | "dest_name" | "payload_hash">

/** A taken-over claim's current columns, as the engine sees them. */
export function adopted(r: AdoptedRow): Pick<ClaimRow, "attempts" | "state" | "dest" | "destName" | "payloadHash"> {
  return { attempts: r.attempts, state: r.state, dest: r.dest, destName: r.dest_name, payloadHash: r.payload_hash }
}

/** A selected consumers row. */
export interface RawOwner {
  owner_id: string
  host: string
  pid: number
  boot_id: string
  start_ticks: string
}

/** A consumers row as the engine sees it. */
export function toOwner(r: RawOwner): Owner {
  return { ownerId: r.owner_id, host: r.host, pid: r.pid, bootId: r.boot_id, startTicks: r.start_ticks }
}

/** A selected claims row as the engine sees it. */
export function toClaimRow(r: RawClaimRow): ClaimRow {
  return {
    name: r.name,
    claimId: r.claim_id,
    ownerId: r.owner_id,
    attempts: r.attempts,
    state: r.state,
    dest: r.dest,
    destName: r.dest_name,
    payloadHash: r.payload_hash,
    // The joined consumers row, when there is one: its columns are NOT NULL, so a host means
    // the whole row is there.
    owner:
      r.owner_id !== null && r.host !== null
        ? {
            ...toOwner(r as RawClaimRow & RawOwner),
            heartbeatAt: r.heartbeat_at ?? "",
            // A lease is judged by the clock that wrote the heartbeat: the server's, which every
            // host shares, where the ledger measured the age; else this host's, as on SQLite,
            // whose consumers are all on this host.
            heartbeatAgeMs: r.heartbeat_age_ms ?? wallClock() - Date.parse(r.heartbeat_at ?? ""),
          }
        : undefined,
  }
}

/** The detail of a `beyond-horizon` rejection, the same on both backends. */
export function beyondHorizon(seq: number | string, maxSeq: number | string, orderNo: string): string {
  return `msg_id unknown, but seq ${seq} <= ${maxSeq}, the highest seq of order ${orderNo} pruned by compact: older than the deduplication horizon`
}

/** A deferrals row: a file waiting in deferred/ for its next attempt. */
export interface Deferral {
  /** Its name in deferred/. */
  readonly file: string
  readonly msgId: string
  /** Transient failures so far. */
  readonly attempts: number
  readonly firstDeferredAt: string
  readonly nextAttemptAt: string
  readonly lastError: string
  /** The claim that holds the file now: the one that deferred it, or the one that picked it up. */
  readonly claimId: string
  /** The sha256 of the file's bytes (absent in rows written before it was kept). */
  readonly payloadHash?: string
}

/** A deferrals row as both backends select it. */
export interface RawDeferral {
  file: string
  msg_id: string
  attempts: number
  first_deferred_at: string
  next_attempt_at: string
  last_error: string
  claim_id: string
  payload_hash: string | null
}

/** A selected deferrals row as the engine sees it. */
export function toDeferral(r: RawDeferral): Deferral {
  return {
    file: r.file,
    msgId: r.msg_id,
    attempts: Number(r.attempts),
    firstDeferredAt: r.first_deferred_at,
    nextAttemptAt: r.next_attempt_at,
    lastError: r.last_error,
    claimId: r.claim_id,
    ...(r.payload_hash !== null && { payloadHash: r.payload_hash }),
  }
}
