import type { Outcome, Verdict } from "../ledger/model.ts"
import type { AnyEffect, LedgerPort } from "../ledger/port.ts"
import type { Log } from "../log.ts"
import type { Message, MessageType } from "../message/validate.ts"
import type { Queue } from "../queue/root.ts"
import type { SourcePort } from "../source/port.ts"
import type { DeferPolicy } from "../transient.ts"
import type { ConsumeSummary } from "./summary.ts"

/**
 * Settings of a consume run; every one has a default a demanding operator can live with. `E`
 * is the ledger's effect type, so that `effect` must be one that ledger runs.
 */
export interface ConsumeOptions<T extends Message = Message, E extends AnyEffect = AnyEffect> {
  readonly queue: Queue
  /** Its effect type is the run's: `effect` decides `E`, and the ledger must run such effects. */
  readonly ledger: LedgerPort<NoInfer<E>>
  /** The message type; defaults to spool's Message. Must require at least Message's fields. */
  readonly type?: MessageType<T>
  /** A business effect committed in the same transaction as the processed row (for the ledger's backend). */
  readonly effect?: E
  /** Messages per ledger transaction. */
  readonly batchSize?: number
  /**
   * Attempts a file may take before it is declared poison (none committed, the consumer dead
   * with the file alone in hand on the last; a broker's delivery count counts too); below 2 it
   * is taken as 2.
   */
  readonly maxAttempts?: number
  /** Files larger than this are sent to error/ as too-large without being read; at most maxMessageBytes (1 GiB). */
  readonly maxBytes?: number
  /** Leave files younger than this (by mtime) for later: their producer may still be writing. */
  readonly minAgeMs?: number
  /**
   * When a message whose effect threw a TransientError is tried again (from deferred/), and
   * how long it may keep failing before it goes to error/ as `expired`; each field defaults to
   * `defaultDeferPolicy`'s.
   */
  readonly defer?: Partial<DeferPolicy>
  /** fsync directories after renames (the Maildir rule). Off only with --no-fsync. */
  readonly durable?: boolean
  /**
   * Do the file work (renames, reads) of one batch on a second thread while the ledger work
   * of the batch before it runs on this one. Default true; it starts only once a pass claims
   * a full batch, so a trickle never pays for the thread.
   */
  readonly pipeline?: boolean
  /** Bytes of one batch's files the I/O thread reads ahead; files past it are read on this thread. */
  readonly readAheadBytes?: number
  /** How long another host's consumer may be silent before its claims count as abandoned. */
  readonly leaseMs?: number
  /**
   * Consume this broker source instead of inbox/ (consume/source-loop.ts): each delivery lands as
   * a claimed file in processing/ and is acknowledged once its file has moved. The caller opens
   * and closes it.
   */
  readonly source?: SourcePort
  /** With a source: how long a receive waits for the first delivery before a drain ends. */
  readonly idleWaitMs?: number
  /** With a source: go on receiving until `signal` stops the run, instead of ending when idle. */
  readonly untilStopped?: boolean
  /** Stop claiming when aborted; the batches in hand are finished. */
  readonly signal?: AbortSignal
  readonly log?: Log
  /** Called after every committed batch, for progress displays. */
  readonly onBatch?: (summary: Readonly<ConsumeSummary>) => void
  /**
   * Called after each commit with its outcomes and their verdicts, before the files move. The
   * commit is durable whatever it does: an error it throws is logged as a warning and changes
   * nothing.
   */
  readonly onCommit?: (outcomes: readonly Outcome[], verdicts: readonly Verdict[]) => void | Promise<void>
}

export { maxMessageBytes } from "../queue/files.ts"

export const defaults = {
  batchSize: 1000,
  maxAttempts: 3,
  maxBytes: 1024 * 1024,
  minAgeMs: 0,
  leaseMs: 120_000,
  idleWaitMs: 1000,
  /** Bounds the memory a batch read ahead can hold, whatever the size of its files. */
  readAheadBytes: 16 * 1024 * 1024,
} as const
