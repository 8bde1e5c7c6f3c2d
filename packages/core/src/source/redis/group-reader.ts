// What a Redis source reads next from its consumer group, and from where: its own pending entries
// (XREADGROUP from an id), entries idle past the lease in any consumer's pending list (XAUTOCLAIM,
// a scan resumed from its cursor), new entries (XREADGROUP `>`). All on the reader's connection,
// one command at a time, as one receive at a time sends them.
import type { Log } from "../../log.ts"
import { type Entry, entriesOf, type RawEntry } from "./entry.ts"
import type { Holder } from "./lease.ts"
import { type Link, messageOf } from "./link.ts"

/** An entry taken again, with the group's delivery count for it (undefined when Redis no longer lists it). */
export interface TakenEntry {
  readonly entry: Entry
  readonly count: number | undefined
}

/** The reading state of one consumer of a group. */
export class GroupReader {
  readonly #link: Link
  readonly #holder: Holder
  readonly #leaseMs: number
  readonly #isInHand: (id: string) => boolean
  #hasGroup = false
  /** Where the next re-read of this consumer's pending entries starts; undefined: none due. */
  #pendingFrom: string | undefined = "0"
  #lastNewId: string | undefined
  #scanCursor = "0-0"
  #nextScanAt = 0

  constructor(link: Link, holder: Holder, leaseMs: number, isInHand: (id: string) => boolean) {
    this.#link = link
    this.#holder = holder
    this.#leaseMs = leaseMs
    this.#isInHand = isInHand
  }

  /** When the next look for idle entries is due (epoch ms). */
  get nextScanAt(): number {
    return this.#nextScanAt
  }

  /** Makes the next look for idle entries due no later than `delayMs` from now (entries handed back). */
  scanWithin(delayMs: number): void {
    this.#nextScanAt = Math.min(this.#nextScanAt, Date.now() + Math.max(0, delayMs))
  }

  /**
   * The reader's connection was lost and made again: a read whose reply was lost with it left its
   * entries pending to this consumer, past the last new entry received, and they are read again.
   */
  reconnected(): void {
    this.#pendingFrom ??= this.#lastNewId ?? "0"
  }

  /** Creates the group at 0 (with the stream, if need be) unless it exists; says so in `log`. */
  async ensureGroup(log: Log, source: string): Promise<void> {
    if (this.#hasGroup) return
    const { stream, group } = this.#holder
    try {
      await this.#link.client.call("XGROUP", "CREATE", stream, group, "0", "MKSTREAM")
      log.info("group-created", { source, stream, group, from: "0" })
    } catch (error) {
      if (!/BUSYGROUP/.test(messageOf(error))) throw error
    }
    this.#hasGroup = true
  }

  /** This consumer's own pending entries, then entries idle past the lease (when a look is due), at most `max`. */
  async takeOld(max: number): Promise<TakenEntry[]> {
    const { stream, group, consumer } = this.#holder
    const client = this.#link.client
    const got: TakenEntry[] = []
    while (this.#pendingFrom !== undefined && got.length < max) {
      const count = String(max - got.length)
      const from = this.#pendingFrom
      const reply = await client.callBuffer(
        "XREADGROUP",
        ...["GROUP", group, consumer, "COUNT", count, "STREAMS", stream, from],
      )
      const entries = entriesOf(streamEntries(reply))
      this.#pendingFrom = entries.at(-1)?.id
      got.push(...(await this.#counted(entries)))
    }
    if (got.length >= max || Date.now() < this.#nextScanAt) return got
    const reply = await client.callBuffer(
      "XAUTOCLAIM",
      ...[stream, group, consumer, String(this.#leaseMs), this.#scanCursor, "COUNT", String(max - got.length)],
    )
    const [cursor, claimed] = Array.isArray(reply) ? (reply as [Buffer, unknown]) : [undefined, []]
    this.#scanCursor = cursor?.toString() ?? "0-0"
    // A whole pass over the pending list done: the next one is due a quarter lease later.
    if (this.#scanCursor === "0-0") this.#nextScanAt = Date.now() + this.#leaseMs / 4
    got.push(...(await this.#counted(entriesOf(claimed))))
    return got
  }

  /** New entries, at most `count`, waiting up to `blockMs` for the first (not at all when undefined). */
  async readNew(count: number, blockMs: number | undefined): Promise<Entry[]> {
    const { stream, group, consumer } = this.#holder
    const args = ["GROUP", group, consumer, "COUNT", String(count)]
    if (blockMs !== undefined) args.push("BLOCK", String(Math.ceil(blockMs)))
    const reply = await this.#link.client.callBuffer("XREADGROUP", ...args, "STREAMS", stream, ">")
    const entries = entriesOf(streamEntries(reply)).filter((e): e is Entry => e.fields !== null)
    const last = entries.at(-1)
    if (last !== undefined) this.#lastNewId = last.id
    return entries
  }

  // Entries read again or claimed, each with its delivery count, without those already in hand.
  // An entry deleted from the stream (XDEL, trimming) has nothing to deliver: it is acknowledged.
  async #counted(entries: readonly RawEntry[]): Promise<TakenEntry[]> {
    const { stream, group } = this.#holder
    const client = this.#link.client
    const gone = entries.filter((e) => e.fields === null).map((e) => e.id)
    if (gone.length > 0) await client.call("XACK", stream, group, ...gone)
    const live = entries.filter((e): e is Entry => e.fields !== null && !this.#isInHand(e.id))
    const counts = await Promise.all(live.map((e) => client.call("XPENDING", stream, group, e.id, e.id, "1")))
    return live.map((entry, i) => ({ entry, count: countOf(counts[i]) }))
  }
}

/** The entry list of an XREADGROUP reply on one stream: [[key, entries]], or null when nothing came. */
function streamEntries(reply: unknown): unknown {
  if (!Array.isArray(reply)) return []
  const [first] = reply as [unknown, unknown][]
  return first?.[1] ?? []
}

/** The delivery count of an extended XPENDING reply on one id: [[id, consumer, idle, count]]. */
function countOf(reply: unknown): number | undefined {
  const row = Array.isArray(reply) ? (reply[0] as unknown[] | undefined) : undefined
  const count = Number(row?.[3])
  return Number.isSafeInteger(count) && count > 0 ? count : undefined
}
