import { type ClaimInReply, IoError, IoThread } from "../queue/io-thread.ts"
import { type Claimed, claimedIn, claimThroughIo, markInProcessing } from "./claim.ts"
import { commit } from "./commit.ts"
import type { Context } from "./context.ts"
import { type Moving, moveDeferredAside, moveThroughIo, settleMoves } from "./move.ts"

/**
 * The protocol on two threads: the I/O thread moves batch k+1 into processing/ and reads it
 * while this thread judges and commits batch k, then moves batch k out while this thread
 * claims batch k+2. Started once a pass claims a full batch (with the pipeline on).
 */
export class Pipeline {
  readonly #c: Context
  readonly #io: IoThread
  /** The batch the I/O thread is claiming into processing/, judged once the next one is claimed. */
  #claimed: Claimed | undefined
  /** Committed batches being moved out, oldest first. */
  readonly #moving: Moving[] = []
  /**
   * The share of a batch's files the I/O thread reads; this thread reads the rest. Renames
   * cost more or less depending on the filesystem and the directories' sizes, so the share
   * follows the load: down when this thread had to wait for the I/O thread, up when not. Down
   * fast, up slowly: where renames are the bottleneck, every read the I/O thread keeps delays
   * the whole pipeline, while this thread reading a few more than it must costs it only slack.
   */
  #readShare = 1

  constructor(c: Context) {
    this.#c = c
    const q = c.queue
    this.#io = new IoThread({
      dirs: { inbox: q.inbox, processing: q.processing, done: q.done, error: q.error },
      maxBytes: c.maxBytes,
    })
  }

  /**
   * The pipelined protocol, for one batch: claim it (the same transaction forgets the claims
   * whose moves have finished), hand its renames into processing/ and its reads to the I/O
   * thread, and meanwhile judge, commit and hand over the moves of the batch claimed before.
   * Every step of the protocol keeps its order for each batch; only different batches overlap.
   */
  async claim(names: readonly string[], regular: ReadonlySet<string>): Promise<void> {
    await settleMoves(this.#c, this.#moving, false)
    const batch = await claimThroughIo(this.#c, this.#io, names, regular, this.#readShare)
    const previous = this.#claimed
    this.#claimed = batch
    if (previous !== undefined) await this.#judge(previous)
    // Let signal handlers run between batches: SIGTERM is honoured at a batch boundary.
    await new Promise((r) => setImmediate(r))
  }

  /** Finishes the pipeline: judges the last claimed batch and waits for every move out. */
  async drain(): Promise<void> {
    const last = this.#claimed
    this.#claimed = undefined
    if (last !== undefined) await this.#judge(last)
    await settleMoves(this.#c, this.#moving, true)
  }

  /**
   * After a fatal error: lets the I/O thread finish what it was asked to do, then learns where
   * those files are, for the hand-back.
   */
  async halt(): Promise<void> {
    await this.#io.idle()
    const claimed = this.#claimed
    this.#claimed = undefined
    if (claimed !== undefined)
      try {
        markInProcessing(claimed.items, (await claimed.reply).status)
      } catch (error) {
        markInProcessing(claimed.items, error instanceof IoError ? error.status : undefined)
      }
    try {
      await settleMoves(this.#c, this.#moving, true)
    } catch {}
  }

  close(): void {
    this.#io.close()
  }

  /** Judges and commits a batch the I/O thread has claimed, then hands it its moves out. */
  async #judge({ items, reply }: Claimed): Promise<void> {
    let r: ClaimInReply
    try {
      const waitedFrom = performance.now()
      r = await reply
      const waited = performance.now() - waitedFrom > 0.5
      this.#readShare = Math.min(1, Math.max(0, this.#readShare + (waited ? -0.25 : 0.02)))
    } catch (error) {
      markInProcessing(items, error instanceof IoError ? error.status : undefined)
      throw error
    }
    const held = await claimedIn(this.#c, items, r)
    if (held === undefined) return
    this.#c.passClaimed = true
    const committedAt = await commit(this.#c, held)
    const rest = await moveDeferredAside(this.#c, held, committedAt)
    this.#moving.push(moveThroughIo(this.#c, this.#io, rest, committedAt))
  }
}
