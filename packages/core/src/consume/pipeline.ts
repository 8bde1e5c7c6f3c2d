import { type ClaimInReply, IoError, IoThread } from "../queue/io-thread.ts"
import { type Claimed, claimedIn, claimThroughIo, markInProcessing } from "./claim.ts"
import type { Context, Item } from "./context.ts"
import { type Moving, moveDeferredAside, moveThroughIo, settleMoves } from "./move.ts"

/**
 * The directory queue's protocol on two threads: the I/O thread moves batch k+1 into
 * processing/ and reads it while this thread judges and commits batch k, then moves batch k
 * out while this thread claims batch k+2. Started once a pass claims a full batch (with the
 * pipeline on); consume/directory.ts drives it.
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
   * whose moves have finished) and hand its renames into processing/ and its reads to the I/O
   * thread; meanwhile the batch claimed before is taken in and returned, for the engine to
   * judge and commit while the I/O thread works, and then to hand to `moveOut`. Every step of
   * the protocol keeps its order for each batch; only different batches overlap.
   */
  async claim(names: readonly string[], regular: ReadonlySet<string>): Promise<Item[] | undefined> {
    await settleMoves(this.#c, this.#moving, false)
    const batch = await claimThroughIo(this.#c, this.#io, names, regular, this.#readShare)
    const previous = this.#claimed
    this.#claimed = batch
    return previous === undefined ? undefined : await this.#takeIn(previous)
  }

  /** The last batch claimed, taken in for the engine to commit; then `settle` waits for every move out. */
  async last(): Promise<Item[] | undefined> {
    const last = this.#claimed
    this.#claimed = undefined
    return last === undefined ? undefined : await this.#takeIn(last)
  }

  /** Hands a committed batch its moves out: deferred files on this thread, the rest on the I/O thread. */
  async moveOut(held: readonly Item[], committedAt: number): Promise<void> {
    const rest = await moveDeferredAside(this.#c, held, committedAt)
    this.#moving.push(moveThroughIo(this.#c, this.#io, rest, committedAt))
  }

  /** Waits for every move out handed to the I/O thread, and completes them. */
  async settle(): Promise<void> {
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

  /** Takes in a batch the I/O thread has claimed: the files now in processing/, with what it read of them. */
  async #takeIn({ items, reply }: Claimed): Promise<Item[] | undefined> {
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
    return await claimedIn(this.#c, items, r)
  }
}
