import { join } from "node:path"
import { fault } from "../_fault.ts"
import { workDone } from "../collect.ts"
import { SpoolError } from "../errors.ts"
import type { Destination, Outcome, Verdict } from "../ledger/model.ts"
import { clockNow, type IoThread, type MoveOut, type MoveOutReply } from "../queue/io-thread.ts"
import { quoteName } from "../queue/names.ts"
import { moveFinished } from "../queue/root.ts"
import type { Context, Item } from "./context.ts"
import { countVerdict } from "./summary.ts"

/** A committed batch whose move out of processing/ the I/O thread is doing. */
export interface Moving {
  readonly items: Item[]
  /** When the batch's commit returned (clockNow). */
  readonly committedAt: number
  readonly done: Promise<void>
  reply?: MoveOutReply
  error?: unknown
}

/**
 * Where a committed file goes: error/ for a rejected file and for a verdict that refused it,
 * deferred/ for a transient failure; nowhere for a claim this consumer lost or a file that
 * vanished (not its file to move).
 */
export function destOf(o: Outcome, verdict: Verdict | undefined): Destination | undefined {
  if (verdict === "lost" || verdict === "vanished") return undefined
  if (verdict === "deferred") return "deferred"
  return o.kind === "rejected" ||
    verdict === "handler-rejected" ||
    verdict === "beyond-horizon" ||
    verdict === "expired"
    ? "error"
    : "done"
}

/** The name a committed item should have where it goes: chosen before its move for error/ and deferred/. */
export function preferredName(item: Item): string {
  const o = item.outcome as Outcome
  return o.kind === "rejected" ? o.destName : (item.deferredAs ?? o.name)
}

/**
 * Moves a pipelined batch's deferred items on this thread (the I/O thread knows done/ and
 * error/ only; a transient failure is rare) and returns the rest, for moveThroughIo.
 */
export async function moveDeferredAside(c: Context, held: readonly Item[], committedAt: number): Promise<Item[]> {
  const deferred = held.filter((i) => i.verdict === "deferred")
  if (deferred.length === 0) return held as Item[]
  for (const item of deferred) countVerdict(c.summary, c.log, item.outcome as Outcome, "deferred")
  const moved = await moveHeld(c, deferred, committedAt)
  c.moved.push(...moved)
  for (const item of deferred) c.inHand.delete(item)
  return held.filter((i) => i.verdict !== "deferred")
}

/**
 * Moves committed items out of processing/ (the acknowledgement) and makes the moves durable.
 * `committedAt` (clockNow) is when their commit returned: see movesHeld.
 */
export async function moveHere(c: Context, all: readonly Item[], committedAt: number): Promise<void> {
  const leaving: Item[] = []
  for (const item of all) {
    const o = item.outcome as Outcome
    const verdict = item.verdict as Verdict
    countVerdict(c.summary, c.log, o, verdict)
    if (destOf(o, verdict) === undefined) c.inHand.delete(item)
    else leaving.push(item)
  }
  movedOut(c, await moveHeld(c, leaving, committedAt))
}

/**
 * Moves committed items out of processing/ on this thread and fsyncs the directories they
 * entered; returns those this consumer moved or found moved by their adopter. A consumer
 * stalled after its commit for longer than its lease (SIGSTOP, a paused VM) may have had its
 * claims taken over: their adopter moved the files, and a new delivery of the same name may
 * since sit in processing/, claimed by someone else. So past `moveGuardMs` after the commit
 * each file moves only while the ledger says its claim is still this consumer's; a claim
 * taken over is its adopter's file, left alone and not forgotten by this consumer.
 */
async function moveHeld(c: Context, items: readonly Item[], committedAt: number): Promise<Item[]> {
  const entered = new Set<Destination>()
  const moved: Item[] = []
  for (const item of items) {
    const o = item.outcome as Outcome
    const dest = destOf(o, item.verdict) ?? "done"
    if (clockNow() - committedAt > c.moveGuardMs && !(await c.ledger.holdsClaim(o.name, o.claimId, c.owner.ownerId))) {
      c.inHand.delete(item)
      c.log.warn("moved-by-other", {
        file: o.name,
        problem: `committed here, but the claim was taken over while this consumer was stalled before its move; the file is left to the consumer that took it over`,
      })
      continue
    }
    moved.push(item)
    if (!(await moveOut(c, o.name, dest, preferredName(item), o.claimId)))
      await notThereToMove(c, o.name, o.claimId, dest)
    else entered.add(dest)
  }
  // A directory no file entered has nothing to make durable: its fsync would be a no-op.
  if (entered.size > 0) c.sync("processing", ...entered)
  return moved
}

/**
 * Hands the moves of a committed batch out of processing/ to the I/O thread; settleMoves
 * fsyncs what it moved, and moves what it had not begun by `moveGuardMs` after `committedAt`.
 */
export function moveThroughIo(c: Context, io: IoThread, held: readonly Item[], committedAt: number): Moving {
  const leaving: Item[] = []
  const moves: MoveOut[] = []
  for (const item of held) {
    const o = item.outcome as Outcome
    countVerdict(c.summary, c.log, o, item.verdict as Verdict)
    const dest = destOf(o, item.verdict)
    if (dest === undefined) {
      c.inHand.delete(item)
      continue
    }
    if (dest === "deferred")
      throw new Error(`${o.name}: a deferred file reached the I/O thread's moves (see moveDeferredAside)`)
    leaving.push(item)
    moves.push([o.name, dest, o.kind === "rejected" ? o.destName : o.name])
  }
  const moving: Moving = {
    items: leaving,
    committedAt,
    done: io.moveOut(moves, committedAt + c.moveGuardMs).then(
      (reply) => {
        moving.reply = reply
      },
      (error: unknown) => {
        moving.error = error
      },
    ),
  }
  return moving
}

/**
 * Completes the batches whose moves out have finished, oldest first (all of them, waiting,
 * when `wait`): fsyncs the directories the files entered, records a renamed failure, and
 * queues the claims to be forgotten.
 */
export async function settleMoves(c: Context, moving: Moving[], wait: boolean): Promise<void> {
  for (let m = moving[0]; m !== undefined; m = moving[0]) {
    if (m.reply === undefined && m.error === undefined) {
      if (!wait) return
      await m.done
    }
    moving.shift()
    if (m.error !== undefined) throw m.error
    const reply = m.reply as MoveOutReply
    const expiredAt = reply.expiredAt ?? m.items.length
    // The I/O thread's renames, made durable before their claims can be forgotten.
    const missing = new Set(reply.missing)
    const entered = new Set<Destination>()
    for (const [i, item] of m.items.slice(0, expiredAt).entries())
      if (!missing.has(i)) entered.add(destOf(item.outcome as Outcome, item.verdict) ?? "done")
    if (entered.size > 0) c.sync("processing", ...entered)
    for (const [i, to] of reply.renamed) await c.ledger.renameFailure((m.items[i] as Item).claimId, to)
    for (const i of reply.missing) {
      const item = m.items[i] as Item
      await notThereToMove(c, item.name, item.claimId, destOf(item.outcome as Outcome, item.verdict) ?? "done")
    }
    if (expiredAt === m.items.length) movedOut(c, m.items)
    else movedOut(c, [...m.items.slice(0, expiredAt), ...(await moveHeld(c, m.items.slice(expiredAt), m.committedAt))])
  }
}

/** A batch has durably left processing/: its claims go at the next claim, and it counts. */
function movedOut(c: Context, items: readonly Item[]): void {
  c.moved.push(...items)
  for (const item of items) c.inHand.delete(item)
  fault("after-move")
  c.summary.batches++
  workDone(items.length)
  c.options.onBatch?.(c.summary)
}

/** Moves a committed file out of processing/, never replacing anything; false if it is not there. */
export async function moveOut(
  c: Context,
  name: string,
  dest: Destination,
  preferred: string,
  claimId: string,
): Promise<boolean> {
  const to = moveFinished(c.dirs.processing, name, c.dirs[dest], preferred)
  if (to === undefined) return false
  if (to === preferred) return true
  // Taken by a file spool did not put there: the row follows the name the file got.
  if (dest === "error") await c.ledger.renameFailure(claimId, to)
  else if (dest === "deferred") await c.ledger.renameDeferral(claimId, to)
  return true
}

/**
 * A file this consumer committed was gone from processing/ when it came to move it. If its
 * claim was taken over meanwhile (this consumer stalled for longer than the lease, and
 * another one judged it dead), the other consumer has moved the file in its recovery: the
 * outcome stands, and nothing is wrong with the queue. If the claim is still this
 * consumer's, something outside spool removed the file, and the run fails.
 */
async function notThereToMove(c: Context, name: string, claimId: string, dest: Destination): Promise<void> {
  if (await c.ledger.holdsClaim(name, claimId, c.owner.ownerId))
    throw new SpoolError(
      "io",
      `${quoteName(join(c.queue.processing, name))} vanished before it could be moved to ${c.queue[dest]}/ (its claim is still this consumer's: something outside spool removed it)`,
    )
  c.log.warn("moved-by-other", {
    file: name,
    problem: `committed here, but the claim was taken over while this consumer was stalled; the consumer that took it over moved the file to ${dest}/`,
  })
}
