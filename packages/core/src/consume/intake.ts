import { claimDue } from "./claim.ts"
import type { Context, Item } from "./context.ts"
import { moveHere } from "./move.ts"

/**
 * The source port on the engine's side: how a source's messages reach the one consume loop
 * (engine.ts). An intake takes a batch into processing/ under this consumer's claims, the engine
 * judges and commits it, and the intake then settles it: each file moves out of processing/
 * (for a file, the move is the acknowledgement), and a broker's deliveries are acknowledged.
 * Decide, commit, reports, deferral and poison are the engine's, the same for every intake.
 *
 * Two adapters: the directory queue (directory.ts) claims inbox/ files in the ledger and renames
 * them in; a broker (source-loop.ts, over any `SourcePort` in source/) receives deliveries,
 * claims them in the ledger and lands them as files. Both take the deferred files that are due
 * (`dueBatches`) between their own batches.
 */
export interface Intake {
  /**
   * The run's batches, one at a time: the next is asked for only once the engine has committed
   * the one before and called its `settle`. Ends when the source is drained, or the run stops.
   */
  batches(): AsyncGenerator<Batch, void, undefined>
  /** After a fatal error: lets work in flight finish so that the hand-back knows where each file is. */
  halt(): Promise<void>
  /** Ends the run's hold on the source: threads stopped, connections kept by the intake closed. */
  close(): Promise<void>
}

/** A batch in processing/, claimed by this consumer, for the engine to judge and commit. */
export interface Batch {
  /** The files in processing/ under this consumer's claims; may be empty (a broker batch recognised whole). */
  readonly held: readonly Item[]
  /**
   * After the commit (`committedAt` the clockNow it returned; undefined when `held` is empty):
   * moves each file out of processing/ and acknowledges what the source must hear of.
   */
  settle(committedAt: number | undefined): Promise<void>
}

/** A batch moved out on this thread once committed, with nothing else to acknowledge. */
export function movedHere(c: Context, held: readonly Item[]): Batch {
  return { held, settle: (committedAt) => moveHere(c, held, committedAt as number) }
}

/**
 * The deferred files due at `at`, batch by batch, earliest due first: claimed in the ledger (each
 * file's deferrals row becomes its claim), renamed deferred/ -> processing/, and moved out on this
 * thread once committed. A file deferred again meanwhile is due after `at`, so each round tries a
 * deferred file at most once. `before` runs ahead of each claim (the directory queue finishes the
 * batch its I/O thread holds, whose moves the claim may forget).
 */
export async function* dueBatches(
  c: Context,
  at: string,
  before?: () => AsyncGenerator<Batch, void, undefined>,
): AsyncGenerator<Batch, void, undefined> {
  while (!c.isStopping) {
    const due = await c.ledger.dueDeferrals(at, c.batchSize)
    if (due.length === 0) return
    if (before !== undefined) yield* before()
    const held = await claimDue(c, due)
    // Nothing claimable: held by other consumers, or waiting for this one's claims to be forgotten.
    if (held === undefined) return
    c.passClaimed = true
    yield movedHere(c, held)
  }
}
