// What a ledger holds about some messages or files, row by row, the same for both backends:
// what `show` tells an operator. The adapters select the rows; composing them into one
// message's or one file's story is the command's.
import { type ClaimRow, type RawClaimRow, toClaimRow } from "./model.ts"
import { parseResult } from "./verdicts.ts"

/** What to look up: rows with any of these msg_ids, file names, or sha256 payload hashes. */
export interface HistoryKeys {
  readonly msgIds?: readonly string[]
  readonly files?: readonly string[]
  readonly payloadHashes?: readonly string[]
}

/** A processed row: the first delivery of a msg_id, and the result its effect stored. */
interface ProcessedRecord {
  readonly msgId: string
  readonly file: string
  readonly processedAt: string
  readonly claimId: string
  readonly payloadHash: string
  readonly contentHash: string
  /** What the effect returned, parsed; undefined when it stored none. */
  readonly result: unknown
}

/** A later delivery of a msg_id already processed; a conflict when its content differs. */
interface DuplicateRecord {
  readonly msgId: string
  readonly file: string
  readonly seenAt: string
  readonly isConflict: boolean
  readonly claimId: string
  readonly payloadHash: string
  readonly contentHash: string
}

/** A file sent to error/, under the name it got there. */
interface FailureEntry {
  readonly id: number
  readonly file: string
  readonly original: string
  readonly reason: string
  readonly detail: string
  readonly payloadHash: string | null
  readonly claimId: string
  readonly failedAt: string
  readonly replayedAt: string | null
  /** When `delete` removed its file from error/; null while it was not deleted. */
  readonly deletedAt: string | null
}

/** A replay of a file from error/ back to inbox/. */
interface ReplayEntry {
  readonly file: string
  /** The failure it marked replayed; null when the file had no failure record. */
  readonly failureId: number | null
  readonly replayedAt: string
}

/** A claim as stored, with when it was made. */
export type ClaimEntry = ClaimRow & { readonly claimedAt: string }

/**
 * Every row matching a `HistoryKeys`: processed and duplicates rows by msg_id, file or payload
 * hash; failures by name in error/, name on arrival or payload hash; replays by file or of one of
 * those failures; claims by file name. Each list is in the order its rows were written.
 */
export interface LedgerHistory {
  readonly processed: ProcessedRecord[]
  readonly duplicates: DuplicateRecord[]
  readonly failures: FailureEntry[]
  readonly replays: ReplayEntry[]
  readonly claims: ClaimEntry[]
}

/** The lists of `keys`, each as the JSON array text SQLite binds as one parameter (json_each). */
export function keyLists(keys: HistoryKeys): { msgIds: string; files: string; hashes: string } {
  return {
    msgIds: JSON.stringify(keys.msgIds ?? []),
    files: JSON.stringify(keys.files ?? []),
    hashes: JSON.stringify(keys.payloadHashes ?? []),
  }
}

/** A selected processed row. */
interface RawProcessed {
  msg_id: string
  file: string
  processed_at: string
  claim_id: string
  payload_hash: string
  content_hash: string
  result: string | null
}

/** A selected duplicates row. */
interface RawDuplicate {
  msg_id: string
  file: string
  seen_at: string
  is_conflict: number
  claim_id: string
  payload_hash: string
  content_hash: string
}

/** A selected failures row. */
interface RawFailure {
  id: number | string
  file: string
  original: string
  reason: string
  detail: string
  payload_hash: string | null
  claim_id: string
  failed_at: string
  replayed_at: string | null
  deleted_at: string | null
}

/** A selected replays row. */
interface RawReplay {
  file: string
  failure_id: number | string | null
  replayed_at: string
}

/** The rows both adapters select, as one `LedgerHistory`. */
export function toHistory(rows: {
  processed: readonly RawProcessed[]
  duplicates: readonly RawDuplicate[]
  failures: readonly RawFailure[]
  replays: readonly RawReplay[]
  claims: readonly (RawClaimRow & { claimed_at: string })[]
}): LedgerHistory {
  return {
    processed: rows.processed.map((r) => ({
      msgId: r.msg_id,
      file: r.file,
      processedAt: r.processed_at,
      claimId: r.claim_id,
      payloadHash: r.payload_hash,
      contentHash: r.content_hash,
      result: parseResult(r.result),
    })),
    duplicates: rows.duplicates.map((r) => ({
      msgId: r.msg_id,
      file: r.file,
      seenAt: r.seen_at,
      isConflict: Number(r.is_conflict) === 1,
      claimId: r.claim_id,
      payloadHash: r.payload_hash,
      contentHash: r.content_hash,
    })),
    // PostgreSQL returns BIGINT ids as strings.
    failures: rows.failures.map((r) => ({
      id: Number(r.id),
      file: r.file,
      original: r.original,
      reason: r.reason,
      detail: r.detail,
      payloadHash: r.payload_hash,
      claimId: r.claim_id,
      failedAt: r.failed_at,
      replayedAt: r.replayed_at,
      deletedAt: r.deleted_at,
    })),
    replays: rows.replays.map((r) => ({
      file: r.file,
      failureId: r.failure_id === null ? null : Number(r.failure_id),
      replayedAt: r.replayed_at,
    })),
    claims: rows.claims.map((r) => ({ ...toClaimRow(r), claimedAt: r.claimed_at })),
  }
}
