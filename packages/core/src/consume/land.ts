// Landing: a broker delivery becomes a claimed file in processing/, and from there goes the way
// every file goes (decide, commit, move). See source-loop.ts for the order of the steps.
import { createHash } from "node:crypto"
import fs from "node:fs"
import { open } from "node:fs/promises"
import { join } from "node:path"
import { fault } from "../_fault.ts"
import type { Claim, Landing } from "../ledger/model.ts"
import { renameNoReplace, tooLargeRead } from "../queue/files.ts"
import { fitsNameMax } from "../queue/names.ts"
import type { Delivery } from "../source/port.ts"
import type { Context, Item } from "./context.ts"

/** A delivery of a batch with its landed name and the sha256 of its body. */
export interface Arrival {
  readonly delivery: Delivery
  readonly name: string
  readonly hash: string
}

/**
 * The name a delivery lands under: `<scheme>-<id>.json` (`nats-ORDERS-17.json`), the queue
 * added for AMQP, whose ids are the publishers' (`amqp-orders-p-1.json`), and the stream for
 * Redis, whose entry ids each stream numbers alone (`redis-orders-1700000000000-0.json`). Every byte outside
 * `[A-Za-z0-9._~+=@,-]` is written %XX, `%` included, so two ids never share a name and the name
 * is a storable, visible file name with no `/`. One past 255 bytes keeps its head and ends in a
 * hash of the whole: still one name per id.
 */
export function landedName(d: Delivery): string {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(d.origin.source)?.[1]?.toLowerCase() ?? "source"
  // Where ids are only unique within the address (a queue's message-ids, a stream's entry ids), the address is part of the name.
  const scoped = addressScoped[scheme]
  const scope = scoped === undefined ? scheme : `${scoped}-${d.origin.address}`
  const stem = `${scope}-${d.id.replaceAll(":", "-")}`
  const name = `${escapeName(stem)}.json`
  if (fitsNameMax(name)) return name
  const digest = createHash("sha256").update(stem).digest("hex").slice(0, 32)
  let head = escapeName(stem).slice(0, 200)
  // Never cut an escape in half.
  head = head.replace(/%[0-9A-F]?$/, "")
  return `${head}~${digest}.json`
}

const addressScoped: Readonly<Record<string, string>> = {
  amqp: "amqp",
  amqps: "amqp",
  redis: "redis",
  rediss: "redis",
}

function escapeName(text: string): string {
  let out = ""
  for (const c of text) {
    if (/^[A-Za-z0-9._~+=@,-]$/.test(c)) out += c
    else for (const b of Buffer.from(c)) out += `%${b.toString(16).toUpperCase().padStart(2, "0")}`
  }
  // A leading dot would hide it from every scan of the queue.
  return out.startsWith(".") ? `%2E${out.slice(1)}` : out
}

/** Pairs each delivery with its name and hash. */
export function arrivals(batch: readonly Delivery[]): Arrival[] {
  return batch.map((delivery) => ({
    delivery,
    name: landedName(delivery),
    hash: Bun.CryptoHasher.hash("sha256", delivery.body, "hex"),
  }))
}

/**
 * Whether a landed pair with an outcome means this very delivery was committed: for a stable id
 * (the same on every redelivery, different for a message published again) always; for an id made
 * from the body only when the source says an earlier delivery went unacknowledged. Otherwise the
 * same bytes arriving again are a new delivery, and the ledger judges it (a duplicate).
 */
export function isRecognisable(d: Delivery): boolean {
  return d.stableId || d.redelivered
}

/**
 * What a landing's claim records: attempts from the source's count, so the poison rule applies,
 * but at most `poisonAt - 1`. A delivery counted `poisonAt` times or more is landed alone
 * (source-loop.ts), and its last attempt is counted only just before it is judged, as recovery
 * counts a file's (countAttempt): a death before that, or a database failing cleanly, costs it nothing.
 */
export function toLanding(a: Arrival, poisonAt: number): Landing {
  const o = a.delivery.origin
  return {
    name: a.name,
    attempts: Math.min(Math.max(1, a.delivery.deliveryCount ?? 1), poisonAt - 1),
    payloadHash: a.hash,
    deliveryId: a.delivery.id,
    origin: {
      source: o.source,
      address: o.address,
      ...(o.headers !== undefined ? { headers: o.headers } : {}),
      ...(o.messageId !== undefined ? { messageId: o.messageId } : {}),
    },
  }
}

/**
 * Writes each claimed delivery's body to processing/ under its claimed name, as a producer writes
 * into inbox/: fully written (and fsynced) under tmp/, then renamed no-replace, then processing/
 * fsynced once. Every body is in tmp/ and fsynced before the first rename. A claim whose name processing/ already holds (a file no claim explained, left by
 * hand) is given up. Returns the items now in processing/, their bytes and hash already read.
 */
export async function landClaimed(
  c: Context,
  claims: readonly Claim[],
  byName: ReadonlyMap<string, Arrival>,
): Promise<Item[]> {
  const held: Item[] = []
  const gone: Claim[] = []
  const tmps = await writeAll(c, claims, byName)
  if (claims.length > 0) fault("after-land-write")
  for (const [i, claim] of claims.entries()) {
    const a = byName.get(claim.name) as Arrival
    const tmp = tmps[i] as string
    const moved = renameNoReplace(tmp, join(c.queue.processing, claim.name))
    if (moved !== "moved") {
      fs.rmSync(tmp, { force: true })
      if (moved === "missing")
        c.log.warn("vanished", {
          file: claim.name,
          problem:
            "its body under tmp/ was removed by another consumer's recovery (this one stalled past its lease); the delivery is handed back",
        })
      else
        c.log.warn("stray-file", {
          file: claim.name,
          problem: "processing/ already holds a file of this name with no claim; the delivery is handed back",
        })
      gone.push(claim)
      continue
    }
    const item: Item = { ...claim, isRegular: true, inProcessing: true }
    if (a.delivery.refusal !== undefined)
      item.outcome = c.decider.reject(item, a.delivery.refusal.reason, a.delivery.refusal.detail, a.hash)
    // As a file of that size would be: to error/ unread (recovery, reading the landed file, judges it so too).
    else if (a.delivery.body.length > c.maxBytes) item.read = tooLargeRead(a.delivery.body.length, c.maxBytes)
    else {
      item.read = { ok: true, bytes: a.delivery.body }
      item.hash = a.hash
    }
    held.push(item)
  }
  for (const item of held) c.inHand.add(item)
  await c.ledger.release(c.owner.ownerId, gone)
  if (held.length > 0) c.sync("processing")
  fault("after-claim")
  return held
}

/**
 * The name a claim's body is written under in tmp/: its claim id, which names its owner, so that
 * a leftover of a consumer killed mid-landing is known by the claim (see removeAbandonedLandings).
 */
export function landingTmpName(claimId: string): string {
  return `${claimId}${landingSuffix}`
}

/** The claim id of a landing's tmp/ file, or undefined for any other file there. */
export function landingClaimId(tmpName: string): string | undefined {
  return tmpName.endsWith(landingSuffix) ? tmpName.slice(0, -landingSuffix.length) : undefined
}

const landingSuffix = ".land"

/**
 * Writes every claim's body under tmp/, fsynced when durable, and returns their paths in claim
 * order. One fsync at a time costs a journal commit per delivery; several in flight share one,
 * which makes landing a batch several times faster. On a failure every file written is removed
 * and the first error thrown: nothing of the batch reaches processing/.
 */
async function writeAll(c: Context, claims: readonly Claim[], byName: ReadonlyMap<string, Arrival>): Promise<string[]> {
  const tmps = claims.map((claim) => join(c.queue.tmp, landingTmpName(claim.claimId)))
  let next = 0
  const errors: unknown[] = []
  const worker = async () => {
    while (next < claims.length && errors.length === 0) {
      const i = next++
      const claim = claims[i] as Claim
      try {
        await writeOne(tmps[i] as string, (byName.get(claim.name) as Arrival).delivery.body, c.durable)
      } catch (error) {
        errors.push(error)
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(writersInFlight, claims.length) }, worker))
  if (errors.length > 0) {
    for (const tmp of tmps) fs.rmSync(tmp, { force: true })
    throw errors[0]
  }
  return tmps
}

/** Enough fsyncs in flight for the journal to commit them together; more gains nothing. */
const writersInFlight = 32

async function writeOne(path: string, body: Uint8Array, durable: boolean): Promise<void> {
  const file = await open(path, "w", 0o644)
  try {
    // write(2) may write less than asked (a disk filling up): a short file must never be judged.
    for (let off = 0; off < body.length; ) off += (await file.write(body, off, body.length - off)).bytesWritten
    if (durable) await file.sync()
  } finally {
    await file.close()
  }
}
