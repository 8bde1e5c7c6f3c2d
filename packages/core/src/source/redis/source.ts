// A Redis stream as a source, read through a consumer group (ioredis).
//
// Receiving (group-reader.ts): this consumer's own pending entries first (XREADGROUP from id 0
// until none is left: what it had in hand when it stopped or was killed), then entries idle past
// the lease in any consumer's pending list (XAUTOCLAIM, every quarter lease), then new ones
// (XREADGROUP `>`, COUNT = max, BLOCK = waitMs, cut into quarter leases so that the look for idle
// entries goes on). A delivery's id is its entry id, the same on every delivery; its count is the
// group's delivery counter (XPENDING), which every re-read and every claim raises.
//
// The lease: an entry stays this consumer's while it is kept alive (lease.ts refreshes its idle
// time, well within the lease, from the engine's keeper thread through keeper.ts, or from the main
// thread through keepAlive); one idle past it is taken over by the next XAUTOCLAIM of any consumer
// of the group. A consumer killed for good thus loses its entries after the lease.
//
// The consumer's name is stable per host and queue root (`spool-HOST-ROOTHASH`), so that a
// consumer started again finds what it held. spool never deletes a consumer: one that has
// nothing pending costs the group a line in XINFO CONSUMERS.
//
// Losing the server: every connection reconnects with backoff (link.ts); a read cut off is sent
// again on the new connection, after re-reading this consumer's pending entries past the last
// one received (a reply lost with the connection left them pending here). Acks and hand-backs
// wait for the connection and are sent again (both are idempotent).
import { createHash } from "node:crypto"
import { realpathSync } from "node:fs"
import { hostname } from "node:os"
import { fileURLToPath } from "node:url"
import { fault } from "../../_fault.ts"
import { SpoolError } from "../../errors.ts"
import { type Log, silentLog } from "../../log.ts"
import type { OpenWait, ReconnectPolicy } from "../backoff.ts"
import type { Delivery, KeeperSpec, Origin, SourcePort } from "../port.ts"
import { type Entry, entryFields, toDelivery } from "./entry.ts"
import { GroupReader } from "./group-reader.ts"
import type { RedisKeeperOptions } from "./keeper.ts"
import { type Holder, handBack, refreshLease } from "./lease.ts"
import { Link, messageOf } from "./link.ts"
import { parseRedisUrl, type RedisUrl } from "./url.ts"

/** How a Redis source connects and names itself. */
export interface RedisSourceOptions extends OpenWait {
  /** Where losses and reconnections are reported (warn), and a group created (info). */
  readonly log?: Log
  /** The prefix of its connections' names in CLIENT LIST; default `spool`. */
  readonly connectionName?: string
  /** The queue root deliveries land in: the default consumer name is made from it and the host. */
  readonly root?: string
  readonly reconnect?: ReconnectPolicy
  readonly connectTimeoutMs?: number
}

/** A Redis source as the engine uses it, plus the names it reads under. */
export interface RedisSource extends SourcePort {
  /** The consumer group's stream, group and this consumer's name. */
  readonly holder: Holder
  readonly keepAliveWithinMs: number
  readonly keeper: KeeperSpec
}

/**
 * Opens the Redis stream of `url` (see url.ts) as a source. Connects and checks that the key is
 * a stream or absent before it resolves; the group is created (at 0, with the stream if need be)
 * by the first receive, so that a source opened only to publish a replay creates nothing.
 */
export async function openRedisSource(url: string, options: RedisSourceOptions = {}): Promise<RedisSource> {
  const parsed = parseRedisUrl(url)
  const source = new RedisStreamSource(parsed, options)
  try {
    await source.check(options.signal)
    options.signal?.throwIfAborted()
  } catch (error) {
    await source.close()
    throw error
  }
  return source
}

/** The default consumer name: one per host and queue root, the same every time they start. */
export function consumerName(root: string | undefined): string {
  if (root === undefined) return `spool-${hostname()}`
  let path = root
  try {
    path = realpathSync(root)
  } catch {
    // A root that does not exist yet is named by its path as given.
  }
  return `spool-${hostname()}-${createHash("sha256").update(path).digest("hex").slice(0, 12)}`
}

class RedisStreamSource implements RedisSource {
  readonly describe: string
  readonly holder: Holder
  readonly keepAliveWithinMs: number
  readonly keeper: KeeperSpec
  readonly #url: RedisUrl
  readonly #log: Log
  readonly #reader: Link
  readonly #control: Link
  readonly #keeper: Link
  readonly #closing = new AbortController()
  readonly #entryIds = new WeakMap<Delivery, string>()
  readonly #inHand = new Set<string>()
  readonly #inFlight = new Set<Promise<unknown>>()
  readonly #group: GroupReader
  #isReceiving = false
  #readerId: string | undefined
  #readerConnections = 0
  #closed: Promise<void> | undefined

  constructor(url: RedisUrl, options: RedisSourceOptions) {
    this.#url = url
    this.describe = url.describe
    this.keepAliveWithinMs = url.leaseMs
    this.#log = options.log ?? silentLog
    this.holder = { stream: url.stream, group: url.group, consumer: url.consumer ?? consumerName(options.root) }
    const link = (role: string, isQueueing: boolean) =>
      new Link({
        url,
        name: `${options.connectionName ?? "spool"}-${role}`,
        log: this.#log,
        isQueueing,
        ...(options.reconnect !== undefined ? { reconnect: options.reconnect } : {}),
        ...(options.connectTimeoutMs !== undefined ? { connectTimeoutMs: options.connectTimeoutMs } : {}),
      })
    this.#reader = link("reader", false)
    this.#control = link("control", true)
    this.#keeper = link("keeper", true)
    this.keeper = keeperOf(url, this.holder, `${options.connectionName ?? "spool"}-keeper-thread`, options)
    this.#group = new GroupReader(this.#reader, this.holder, url.leaseMs, (id) => this.#inHand.has(id))
    this.#reader.client.on("ready", () => {
      this.#reader.client.call("CLIENT", "ID").then(
        (id) => {
          this.#readerId = String(id)
        },
        () => {},
      )
    })
  }

  /** Fails with a SpoolError when Redis refuses this URL or the key holds something else than a stream. */
  async check(signal?: AbortSignal): Promise<void> {
    const stop = signal === undefined ? this.#closing.signal : AbortSignal.any([this.#closing.signal, signal])
    if (!(await this.#control.ready(stop))) return
    const type = String(await this.#control.client.call("TYPE", this.#url.stream))
    if (type !== "stream" && type !== "none")
      throw new SpoolError(
        "usage",
        `${this.describe}: the key ${JSON.stringify(this.#url.stream)} holds a ${type}, not a stream; ` +
          "correct ?stream= in the URL",
      )
  }

  async receive(max: number, waitMs: number, signal?: AbortSignal): Promise<Delivery[]> {
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`receive takes a max of 1 or more, not ${max}`)
    if (this.#closed) throw new Error(`${this.describe}: receive after close`)
    if (this.#isReceiving) throw new Error(`${this.describe}: receive while another receive waits`)
    this.#isReceiving = true
    const stop = AbortSignal.any([this.#closing.signal, ...(signal ? [signal] : [])])
    try {
      let deadline = Date.now() + waitMs
      for (;;) {
        if (stop.aborted || !(await this.#reader.ready(stop))) return []
        if (this.#reader.connections !== this.#readerConnections) {
          // A new connection: the wait starts over, or an outage would end a drain as if the stream were empty.
          if (this.#readerConnections > 0) this.#group.reconnected()
          this.#readerConnections = this.#reader.connections
          deadline = Math.max(deadline, Date.now() + waitMs)
        }
        const got: Delivery[] = []
        try {
          await this.#group.ensureGroup(this.#log, this.describe)
          got.push(...(await this.#group.takeOld(max)).map((t) => this.#deliver(t.entry, t.count)))
          if (got.length > 0) {
            if (got.length < max) got.push(...(await this.#readNew(max - got.length, undefined, stop)))
            return got
          }
          // The wait is cut where the next look for idle entries is due: a dead consumer's
          // entries that pass the lease meanwhile are taken within the same wait.
          const blockMs = Math.max(1, Math.min(deadline, this.#group.nextScanAt) - Date.now())
          got.push(...(await this.#readNew(max, blockMs, stop)))
          if (got.length > 0 || Date.now() >= deadline) return got
        } catch (error) {
          // What was taken before the connection went is in hand: it goes out, the rest comes next time.
          if (got.length > 0 || this.#closing.signal.aborted) return got
          if (this.#reader.isReady) throw this.#translate(error)
          if (this.#reader.isEnded) throw this.#reader.failure()
        }
      }
    } finally {
      this.#isReceiving = false
    }
  }

  async ack(deliveries: readonly Delivery[]): Promise<void> {
    const ids = this.#release(deliveries)
    if (ids.length === 0) return
    await this.#settle("ack", () => this.#control.client.call("XACK", this.#url.stream, this.#url.group, ...ids))
  }

  /**
   * Leaves the entries pending, due to be taken again after `delayMs` (at once without it) by
   * whichever consumer of the group claims next, this one included (see lease.ts handBack).
   */
  async release(deliveries: readonly Delivery[], delayMs?: number): Promise<void> {
    const ids = this.#release(deliveries)
    if (ids.length === 0) return
    this.#group.scanWithin(delayMs ?? 0)
    await this.#settle("release", () =>
      handBack(this.#control.client, this.holder, ids, this.#url.leaseMs, delayMs ?? 0),
    )
  }

  async keepAlive(deliveries: readonly Delivery[]): Promise<void> {
    const ids = deliveries.map((d) => this.#entryId(d)).filter((id) => this.#inHand.has(id))
    if (this.#closed || ids.length === 0) return
    await refreshLease(this.#keeper.client, this.holder, ids)
  }

  async publish(origin: Origin, body: Uint8Array): Promise<void> {
    if (this.#closed) throw new Error(`${this.describe}: publish after close`)
    await this.#control.ready(this.#closing.signal)
    let added: unknown
    try {
      // NOMKSTREAM: a replay never creates a stream that was removed meanwhile.
      added = await this.#control.client.call("XADD", origin.address, "NOMKSTREAM", "*", ...entryFields(origin, body))
    } catch (error) {
      throw this.#control.isEnded ? this.#control.failure() : this.#translate(error)
    }
    if (added === null)
      throw new SpoolError(
        "not-a-queue",
        `${this.describe}: stream ${JSON.stringify(origin.address)} does not exist; ` +
          "create it (XGROUP CREATE with MKSTREAM, or let a producer add to it) or replay with --to inbox",
      )
    fault("after-publish")
  }

  close(): Promise<void> {
    this.#closed ??= this.#shutDown()
    return this.#closed
  }

  async #shutDown(): Promise<void> {
    this.#closing.abort()
    if (this.#isReceiving) this.#unblockReader()
    await Promise.allSettled([...this.#inFlight])
    await Promise.all([this.#keeper.close(), this.#control.close(), this.#reader.close()])
  }

  async #readNew(count: number, blockMs: number | undefined, stop: AbortSignal): Promise<Delivery[]> {
    const onStop = () => this.#unblockReader()
    if (blockMs !== undefined) stop.addEventListener("abort", onStop, { once: true })
    try {
      return (await this.#group.readNew(count, blockMs)).map((e) => this.#deliver(e, 1))
    } finally {
      stop.removeEventListener("abort", onStop)
    }
  }

  #deliver(entry: Entry, count: number | undefined): Delivery {
    const delivery = toDelivery(entry, this.#url.stream, this.describe, count)
    this.#entryIds.set(delivery, entry.id)
    this.#inHand.add(entry.id)
    return delivery
  }

  #entryId(delivery: Delivery): string {
    const id = this.#entryIds.get(delivery)
    if (id === undefined) throw new Error(`${this.describe}: ${delivery.id} was not received from this source`)
    return id
  }

  /** The entry ids of deliveries leaving this consumer's hands. */
  #release(deliveries: readonly Delivery[]): string[] {
    const ids = deliveries.map((d) => this.#entryId(d))
    for (const id of ids) this.#inHand.delete(id)
    return ids
  }

  // An ack or hand-back that fails (the server out of reach past the policy) is not an error:
  // the entries stay pending and come again, and the ledger recognises them.
  async #settle(what: string, send: () => Promise<unknown>): Promise<void> {
    const sent = send().catch((error: unknown) => {
      this.#log.warn("source-settle-failed", { source: this.describe, what, error: messageOf(error) })
    })
    this.#inFlight.add(sent)
    await sent.finally(() => this.#inFlight.delete(sent))
  }

  // A blocking XREADGROUP holds its connection until it returns: CLIENT UNBLOCK from another
  // connection ends it at once, as a timeout.
  #unblockReader(): void {
    const id = this.#readerId
    if (id === undefined || !this.#control.isReady) return
    this.#control.client.call("CLIENT", "UNBLOCK", id).catch(() => {})
  }

  #translate(error: unknown): SpoolError {
    const text = messageOf(error)
    if (/NOGROUP/.test(text))
      return new SpoolError(
        "io",
        `${this.describe}: the group ${JSON.stringify(this.#url.group)} or the stream is gone (deleted while spool ` +
          "read it); start again to create the group anew at 0: the ledger recognises what this root consumed before",
        { cause: error },
      )
    if (/WRONGTYPE/.test(text))
      return new SpoolError("usage", `${this.describe}: the key ${JSON.stringify(this.#url.stream)} is not a stream`, {
        cause: error,
      })
    return new SpoolError("io", `${this.describe}: ${text}`, { cause: error })
  }
}

/** The keeper of a source at `url`: ./keeper.ts, connecting as the source does, keeping `holder`'s entries. */
function keeperOf(url: RedisUrl, holder: Holder, name: string, options: RedisSourceOptions): KeeperSpec {
  const keeper: RedisKeeperOptions = {
    host: url.host,
    port: url.port,
    db: url.db,
    ...(url.username !== undefined ? { username: url.username } : {}),
    ...(url.password !== undefined ? { password: url.password } : {}),
    isTls: url.isTls,
    name,
    holder,
    connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
  }
  return { module: fileURLToPath(new URL("./keeper.ts", import.meta.url)), options: keeper }
}
