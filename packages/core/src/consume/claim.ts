import fs from "node:fs"
import { join } from "node:path"
import { fault } from "../_fault.ts"
import type { Claim, Deferral } from "../ledger/model.ts"
import type { Log } from "../log.ts"
import { renameNoReplace, renameNoReplaceAt } from "../queue/files.ts"
import { type ClaimInReply, hashAt, InStatus, type IoThread } from "../queue/io-thread.ts"
import { alternateName, escapeUndecodable, fitsNameMax } from "../queue/names.ts"
import { isMessageName } from "../queue/root.ts"
import { type Context, type Item, now } from "./context.ts"
import { defaults } from "./options.ts"
import { countClaimed } from "./summary.ts"

/** A batch claimed and handed to the I/O thread, not yet judged. */
export interface Claimed {
  readonly items: Item[]
  readonly reply: Promise<ClaimInReply>
}

/**
 * Claims a batch on this thread: the claim rows first, then each file's rename into
 * processing/. Returns the files now in processing/, or undefined if there are none.
 */
export async function claimHere(
  c: Context,
  names: readonly string[],
  regular: ReadonlySet<string>,
): Promise<Item[] | undefined> {
  const claims = await c.ledger.claim(c.owner.ownerId, names, now(), c.moved.splice(0))
  if (claims.length === 0) return undefined
  const held: Item[] = []
  const gone: Claim[] = []
  for (const claim of claims) {
    const moved = renameNoReplaceAt(c.dirs.inbox, claim.name, c.dirs.processing, claim.name)
    if (moved === "moved") held.push({ ...claim, isRegular: regular.has(claim.name), inProcessing: true })
    else {
      if (moved === "exists") warnStray(c.log, claim.name)
      gone.push(claim)
    }
  }
  for (const item of held) c.inHand.add(item)
  await c.ledger.release(c.owner.ownerId, gone)
  if (held.length === 0) return undefined
  c.sync("inbox", "processing")
  fault("after-claim")
  countClaimed(c.summary, c.log, held)
  return held
}

/**
 * Claims due deferred files and moves them back into processing/, as claimHere does from
 * inbox/: the claim rows (each file's deferrals row made the new claim's) first, then each
 * rename deferred/ -> processing/ (no-replace), then both directories fsynced. A due row whose
 * file is not in deferred/ (a power cut lost a claim whose rename survived, or the file was
 * removed by hand) is dropped. Returns the files now in processing/, or undefined if none.
 */
export async function claimDue(c: Context, due: readonly Deferral[]): Promise<Item[] | undefined> {
  const me = c.owner.ownerId
  const claims = await c.ledger.claimDue(me, due, now(), c.moved.splice(0))
  if (claims.length === 0) return undefined
  fault("after-pickup-claim")
  const held: Item[] = []
  const gone: Claim[] = []
  for (const claim of claims) {
    const moved = renameNoReplaceAt(c.dirs.deferred, claim.name, c.dirs.processing, claim.name)
    if (moved === "moved") held.push({ ...claim, inProcessing: true })
    else if (moved === "exists") {
      warnStray(c.log, claim.name)
      gone.push(claim)
    } else {
      c.log.warn("deferral-gone", { file: claim.name, problem: "due, but not in deferred/; its deferral is forgotten" })
      await c.ledger.dropDeferral(claim, me)
    }
  }
  for (const item of held) c.inHand.add(item)
  await c.ledger.release(me, gone)
  if (held.length === 0) return undefined
  c.sync("deferred", "processing")
  fault("after-pickup")
  countClaimed(c.summary, c.log, held)
  return held
}

/**
 * Claims a batch in the ledger and hands its renames into processing/, and the reads of the
 * first `readShare` of its files, to the I/O thread. Undefined if nothing was free to claim.
 */
export async function claimThroughIo(
  c: Context,
  io: IoThread,
  names: readonly string[],
  regular: ReadonlySet<string>,
  readShare: number,
): Promise<Claimed | undefined> {
  const claims = await c.ledger.claim(c.owner.ownerId, names, now(), c.moved.splice(0))
  if (claims.length === 0) return undefined
  const items: Item[] = claims.map((claim) => ({ ...claim, isRegular: regular.has(claim.name) }))
  for (const item of items) c.inHand.add(item)
  const reply = io.claimIn(
    items.map((i) => i.name),
    Uint8Array.from(items, (i) => (i.isRegular ? 1 : 0)),
    Math.round(readShare * items.length),
    c.options.readAheadBytes ?? defaults.readAheadBytes,
  )
  reply.catch(() => {}) // awaited when the batch is judged, or by the hand-back
  return { items, reply }
}

/**
 * Takes the I/O thread's report on a batch it moved into processing/ and read: what it read
 * goes with each file, and the claims of files it could not move are given up. Returns the
 * files now in processing/, or undefined if there are none.
 */
export async function claimedIn(c: Context, items: readonly Item[], r: ClaimInReply): Promise<Item[] | undefined> {
  markInProcessing(items, r.status)
  const held: Item[] = []
  const gone: Item[] = []
  for (const [i, item] of items.entries()) {
    if (item.inProcessing) {
      held.push(item)
      const offset = r.spans[2 * i] as number
      if (offset >= 0) {
        item.read = { ok: true, bytes: new Uint8Array(r.data, offset, r.spans[2 * i + 1]) }
        item.hash = hashAt(r, i)
      }
      continue
    }
    c.inHand.delete(item)
    if (r.status[i] === InStatus.exists) warnStray(c.log, item.name)
    gone.push(item)
  }
  for (const [i, reason, detail] of r.rejects) (items[i] as Item).read = { ok: false, reason, detail }
  await c.ledger.release(c.owner.ownerId, gone)
  if (held.length === 0) return undefined
  // The I/O thread moved them; their renames are made durable here, before the commit.
  c.sync("inbox", "processing")
  fault("after-claim")
  countClaimed(c.summary, c.log, held)
  return held
}

/** Records where the I/O thread left each item (undefined status: unknown, so not in hand for sure). */
export function markInProcessing(items: readonly Item[], status: Uint8Array | undefined): void {
  for (const [i, item] of items.entries()) {
    const st = status?.[i]
    item.inProcessing = st === undefined || st === InStatus.untried ? undefined : st === InStatus.moved
  }
}

function warnStray(log: Log, name: string): void {
  log.warn("stray-file", {
    file: name,
    problem:
      "processing/ already holds a file of this name with no claim; it is left in inbox/ until recovery takes the other one",
  })
}

/**
 * Gives every inbox/ entry whose name is not valid UTF-8 a UTF-8 name, each invalid byte
 * written as %XX (`a\xff.json` -> `a%FF.json`), by a no-replace rename inside inbox/; the
 * file is then consumed like any other. The ledger and reports hold names as text, so a
 * name without an exact text spelling could not be claimed, moved or reported.
 */
export function renameUndecodable(c: Context): number {
  let renamed = 0
  let raws: Buffer[]
  try {
    raws = fs.readdirSync(c.queue.inbox, { encoding: "buffer" })
  } catch {
    return 0
  }
  for (const raw of raws) {
    const name = escapeUndecodable(raw)
    if (name === undefined || !isMessageName(name)) continue
    const from = Buffer.concat([Buffer.from(`${c.queue.inbox}/`), raw])
    // A name too long in its %XX spelling starts at name~1.json, shortened to fit.
    for (let k = fitsNameMax(name) ? 0 : 1; ; k++) {
      const to = k === 0 ? name : alternateName(name, k)
      let r: ReturnType<typeof renameNoReplace>
      try {
        r = renameNoReplace(from, join(c.queue.inbox, to))
      } catch (error) {
        c.log.warn("undecodable-name", { file: name, problem: `cannot rename it: ${String(error)}` })
        break
      }
      if (r === "exists") continue
      if (r === "moved") {
        renamed++
        c.log.warn("renamed", { file: to, problem: "its name was not valid UTF-8; bad bytes are now %XX" })
      }
      break
    }
  }
  if (renamed > 0) c.sync("inbox")
  return renamed
}
