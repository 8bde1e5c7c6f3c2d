import fs from "node:fs"
import { join } from "node:path"
import { SpoolError } from "../errors.ts"
import { renameNoReplace } from "../queue/files.ts"
import { clockNow } from "../queue/io-thread.ts"
import { type Context, type Item, now } from "./context.ts"
import type { Intake } from "./intake.ts"
import { destOf, moveOut, preferredName } from "./move.ts"

/**
 * After a fatal error (disk full, ledger gone read-only) leave as little as possible in
 * processing/: committed files go on to done/ or error/, the rest back to inbox/, but for a
 * broker's deliveries. What cannot be done here waits in processing/ with its claim, and
 * recovery finishes it on the next start. Returns how many of this run's files wait so.
 */
export async function handBack(c: Context, intake: Intake | undefined): Promise<number> {
  await intake?.halt()
  let isFlushed = false
  try {
    // retryAlone's commits are not yet durable: no committed file moves before they are.
    await c.ledger.flush(c.owner.ownerId, now())
    isFlushed = true
  } catch {}
  const landed = await landedInHand(c)
  let left = 0
  for (const item of c.inHand)
    try {
      if (!(await handBackOne(c, item, isFlushed, landed))) left++
    } catch {
      left++
    }
  c.inHand.clear()
  try {
    c.sync("inbox", "processing", "done", "error", "deferred")
  } catch {}
  return left
}

/**
 * The uncommitted files in hand that a broker delivered (landed, or picked up from deferred/):
 * their claim ids. Undefined when the ledger cannot say, and then none goes back to inbox/.
 */
async function landedInHand(c: Context): Promise<ReadonlySet<string> | undefined> {
  const asked = [...c.inHand].filter((i) => i.committed !== true && i.inProcessing === true).map((i) => i.claimId)
  if (asked.length === 0) return new Set()
  try {
    return await c.ledger.landedClaims(asked)
  } catch {
    return undefined
  }
}

/** Hands one file back; false if it stays in processing/ for recovery. */
async function handBackOne(
  c: Context,
  item: Item,
  isFlushed: boolean,
  landed: ReadonlySet<string> | undefined,
): Promise<boolean> {
  const o = item.committed ? item.outcome : undefined
  if (o !== undefined) {
    const dest = destOf(o, item.verdict)
    // No destination: a claim lost or a file vanished, not this consumer's to move.
    if (dest === undefined) return true
    if (!isFlushed) return false
    // Past the move guard, as moveHeld does: a claim taken over while this consumer stalled
    // makes the name in processing/ its adopter's (maybe another delivery by now). A ledger
    // that cannot say leaves the file to recovery, which reads the claim's state.
    if (clockNow() - (item.committedAt ?? Number.NEGATIVE_INFINITY) > c.moveGuardMs) {
      let isHeld: boolean
      try {
        isHeld = await c.ledger.holdsClaim(o.name, o.claimId, c.owner.ownerId)
      } catch {
        return false
      }
      if (!isHeld) {
        c.log.warn("moved-by-other", {
          file: o.name,
          problem:
            "committed here, but the claim was taken over while this consumer was stalled; the file is left to the consumer that took it over",
        })
        return true
      }
    }
    return await moveOut(c, o.name, dest, preferredName(item), o.claimId)
  }
  // Where the I/O thread left a file it had not reported on when the run failed (its claim was
  // made, its rename maybe not): the I/O thread has stopped, so processing/ says. One that never
  // got there is in inbox/ (or gone): its claim is given up and nothing of it waits.
  if (item.inProcessing === undefined)
    item.inProcessing = fs.lstatSync(join(c.queue.processing, item.name), { throwIfNoEntry: false }) !== undefined
  if (!item.inProcessing) {
    try {
      await c.ledger.release(c.owner.ownerId, [item])
    } catch {}
    return true
  }
  if (c.ledger.isFailedCommitInDoubt || landed?.has(item.claimId) !== false) {
    // A commit that failed (over the network) may still have committed: only recovery, which
    // reads the claim's state, can tell. A file a broker delivered has no place in inbox/: a
    // --source run never reads it there, and the broker, never acknowledged, delivers it
    // again, so a copy in inbox/ would be consumed once more, as a duplicate, by a later run
    // over the directory; it stays under its claim, as after a crash, and the next start's
    // recovery processes it from its landed file (the broker's redelivery is then recognised
    // where the source gives a stable id, else recorded as a duplicate). The run is failing
    // cleanly (the database), not crashing on this file, so the attempt its retry counted is
    // taken back (only from a claim still uncommitted), or a database that fails twice while
    // one file is retried would make a healthy file poison. Where the database cannot take
    // it back, it stays.
    if (item.isAttempted === true)
      try {
        await c.ledger.uncountAttempt(item, c.owner.ownerId)
      } catch {}
    return false
  }
  // The claim first, and only while it is still this consumer's: a claim taken over while
  // this one was stalled is its adopter's file now. A release the failing ledger refuses
  // (locked, disk full) still sends the file back: its claim row then names a file in inbox/,
  // which recovery simply forgets, and the file is claimed afresh, its attempts at 1 (kept
  // in processing/, every restart that fails the same way would count one against it).
  let released: number | undefined
  try {
    released = await c.ledger.release(c.owner.ownerId, [item])
  } catch {}
  if (released === 0) return true
  return renameNoReplace(join(c.queue.processing, item.name), join(c.queue.inbox, item.name)) === "moved"
}

/**
 * A failure that ends the run, with how many of its files wait in processing/ for the next
 * start's recovery, and what that recovery will do with them.
 */
export function withLeftovers(error: unknown, left: number, processing: string): unknown {
  if (!(error instanceof SpoolError)) return error
  if (left === 0)
    return new SpoolError(
      error.code,
      `${error.message}\nnothing is lost: no file of this run waits in ${processing}/ (each went back to inbox/ or on to its destination); once the cause is fixed, run again`,
      { cause: error },
    )
  return new SpoolError(
    error.code,
    `${error.message}\nnothing is lost: ${left} file${left === 1 ? "" : "s"} of this run wait in ${processing}/ with their claims; once the cause is fixed, the next consume on this root finishes them first (a consumer on another host once this one's lease has run out): a committed one is moved to the destination its commit recorded, never processed again, and the others are processed again`,
    { cause: error },
  )
}
