// An MQTT 5 subscription as a source (MQTT.js), at least once: QoS 1 in a persistent session.
//
// Receiving: the session (its client id, clean start off, a session expiry) holds every message
// its subscriptions took in and the consumer has not PUBACKed, across lost connections and
// restarts. CONNECT's Receive Maximum is the largest batch asked for, so the broker never has
// more than one batch of PUBLISHes waiting for this process's PUBACK, handed over or not;
// the rest waits in the session on the broker (Mosquitto's max_queued_messages bounds it).
//
// Acknowledging: a delivery is PUBACKed by `ack`, after the ledger committed it (session.ts says
// how MQTT.js is kept from PUBACKing at once). MQTT counts no deliveries and gives no identity
// that outlives a connection (delivery.ts).
//
// Handing back: MQTT has no negative acknowledgement; a PUBLISH not PUBACKed is sent again only
// when the session's next connection begins. So `release` keeps its deliveries unacknowledged
// and, once they are due and nothing else is in hand, `receive` ends the connection (keeping the
// session) and connects again: the broker resends them, DUP set. Until then they fill places of
// the Receive Maximum; a released batch that fills all of them stalls nothing beyond their due.
//
// Losing the broker: a lost connection is noticed by the next receive, which connects again with
// backoff (ReconnectPolicy) and fails once an outage lasts longer than the policy allows. The
// deliveries of the lost connection cannot be PUBACKed on another: ack skips them, and the broker
// resends them to the next connection, DUP set, which the ledger recognises once committed.
//
// Replays are published on a connection of their own (publisher.ts), never the session's.
import { fault } from "../../_fault.ts"
import { SpoolError } from "../../errors.ts"
import { type Log, silentLog } from "../../log.ts"
import { Backoff, type OpenWait, type ReconnectPolicy, sleep } from "../backoff.ts"
import type { Delivery, Origin, SourcePort } from "../port.ts"
import { toDelivery } from "./delivery.ts"
import { Publisher } from "./publisher.ts"
import { refusalOf, Session } from "./session.ts"
import { type MqttUrl, parseMqttUrl } from "./url.ts"

/** How an MQTT source connects and receives. */
export interface MqttSourceOptions extends OpenWait {
  /** The Receive Maximum sent in CONNECT. Default: the largest `max` a receive has asked for. */
  readonly receiveMaximum?: number
  /** How a lost broker is tried again; see ReconnectPolicy for the defaults. */
  readonly reconnect?: ReconnectPolicy
  /** Where losses and reconnections are reported (warn) and connections made (info). */
  readonly log?: Log
  /** How long one attempt to connect may take; default 10 s. */
  readonly connectTimeoutMs?: number
}

/**
 * Opens the MQTT subscription of `url` (see url.ts) as a source. Connects once (on a connection
 * of its own, not the session's) before it resolves, so a wrong host or login fails here.
 */
export async function openMqttSource(url: string, options: MqttSourceOptions = {}): Promise<SourcePort> {
  const source = new MqttSource(parseMqttUrl(url), options)
  try {
    await source.checkBroker(options.signal)
    options.signal?.throwIfAborted()
  } catch (error) {
    await source.close()
    throw error
  }
  return source
}

interface Handle {
  readonly session: Session
  readonly messageId: number | undefined
}

class MqttSource implements SourcePort {
  readonly describe: string
  readonly #url: MqttUrl
  readonly #options: MqttSourceOptions
  readonly #log: Log
  readonly #backoff: Backoff
  readonly #closing = new AbortController()
  readonly #handles = new WeakMap<Delivery, Handle>()
  readonly #inHand = new Set<Delivery>()
  #session: Session | undefined
  readonly #publisher: Publisher
  #publishing: Promise<unknown> = Promise.resolve()
  /** When the earliest released delivery is due to come again; undefined while none waits. */
  #releasedDue: number | undefined
  #largestMax = 0
  #isReceiving = false
  #closed: Promise<void> | undefined

  constructor(url: MqttUrl, options: MqttSourceOptions) {
    this.#url = url
    this.describe = url.describe
    this.#options = options
    this.#log = options.log ?? silentLog
    this.#backoff = new Backoff(options.reconnect)
    this.#publisher = new Publisher(url, options.connectTimeoutMs ?? 10_000)
  }

  /** Fails with a SpoolError when the broker refuses this URL's login; tries an unreachable one as the policy says. */
  async checkBroker(signal?: AbortSignal): Promise<void> {
    await this.#withBroker(() => this.#publisher.connected(), signal)
  }

  async receive(max: number, waitMs: number, signal?: AbortSignal): Promise<Delivery[]> {
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`receive takes a max of 1 or more, not ${max}`)
    if (this.#closed) throw new Error(`${this.describe}: receive after close`)
    if (this.#isReceiving) throw new Error(`${this.describe}: receive while another receive waits`)
    this.#isReceiving = true
    try {
      this.#largestMax = Math.max(this.#largestMax, max)
      let deadline = Date.now() + waitMs
      for (;;) {
        if (signal?.aborted || this.#closing.signal.aborted) return []
        await this.#reconnectIfDue()
        const subscribed = await this.#subscribed(signal)
        if (subscribed === undefined) return []
        const { session, isNew } = subscribed
        // A resumed session sends what it holds a moment after CONNACK; the wait starts from
        // there, or a broker that was away would end a drain as if empty.
        if (isNew) deadline = Math.max(deadline, Date.now() + waitMs)
        // Released deliveries due while others are in hand wait for a later receive, not this one.
        const due = this.#releasedDue
        const until = due !== undefined && due > Date.now() ? Math.min(deadline, due) : deadline
        const arrival = await session.waitForArrival(
          until - Date.now(),
          this.#closing.signal,
          ...(signal ? [signal] : []),
        )
        if (arrival === "aborted") return []
        if (arrival === "timeout") {
          if (Date.now() >= deadline) return []
          continue
        }
        if (arrival === "lost") {
          await this.#lost(session)
          continue
        }
        await session.gather(max)
        return session.take(max).map((packet) => this.#deliver(session, packet))
      }
    } finally {
      this.#isReceiving = false
    }
  }

  async ack(deliveries: readonly Delivery[]): Promise<void> {
    const bySession = new Map<Session, number[]>()
    for (const delivery of deliveries) {
      const handle = this.#handleOf(delivery)
      this.#inHand.delete(delivery)
      if (handle.messageId === undefined) continue
      bySession.set(handle.session, [...(bySession.get(handle.session) ?? []), handle.messageId])
    }
    // A lost connection's packet ids mean nothing on another: those messages come again, DUP set.
    await Promise.all(
      [...bySession].map(([session, ids]) => (session === this.#session ? session.puback(ids) : undefined)),
    )
  }

  /**
   * Keeps the deliveries unacknowledged and has them sent again on the session's next
   * connection, made by a later receive once `delayMs` has passed and nothing else is in hand.
   */
  async release(deliveries: readonly Delivery[], delayMs = 0): Promise<void> {
    let isPending = false
    for (const delivery of deliveries) {
      const handle = this.#handleOf(delivery)
      this.#inHand.delete(delivery)
      if (handle.session === this.#session && handle.messageId !== undefined) isPending = true
    }
    if (!isPending) return
    const due = Date.now() + Math.max(0, delayMs)
    this.#releasedDue = Math.min(this.#releasedDue ?? due, due)
  }

  async keepAlive(_deliveries: readonly Delivery[]): Promise<void> {}

  publish(origin: Origin, body: Uint8Array): Promise<void> {
    if (this.#closed) return Promise.reject(new Error(`${this.describe}: publish after close`))
    const published = this.#publishing.then(() => this.#publishOne(origin, body)).then(() => fault("after-publish"))
    this.#publishing = published.catch(() => {})
    return published
  }

  close(): Promise<void> {
    this.#closed ??= this.#shutDown()
    return this.#closed
  }

  async #shutDown(): Promise<void> {
    this.#closing.abort()
    await this.#publishing
    const session = this.#session
    this.#session = undefined
    await session?.close()
    await this.#publisher.close()
  }

  #deliver(session: Session, packet: Parameters<typeof toDelivery>[0]): Delivery {
    const delivery = toDelivery(packet, this.describe)
    this.#handles.set(delivery, { session, messageId: packet.qos > 0 ? packet.messageId : undefined })
    this.#inHand.add(delivery)
    return delivery
  }

  #handleOf(delivery: Delivery): Handle {
    const handle = this.#handles.get(delivery)
    if (handle === undefined) throw new Error(`${this.describe}: ${delivery.id} was not received from this source`)
    return handle
  }

  // Released deliveries come again only on a new connection: once they are due and nothing else
  // is in hand (its PUBACK would be lost with the connection), the session is connected anew.
  async #reconnectIfDue(): Promise<void> {
    const session = this.#session
    const due = this.#releasedDue
    if (session === undefined || due === undefined || Date.now() < due || this.#inHand.size > 0) return
    this.#session = undefined
    this.#releasedDue = undefined
    await session.close()
  }

  // The live session, connecting first when there is none; undefined when aborted or closed.
  async #subscribed(signal?: AbortSignal): Promise<{ session: Session; isNew: boolean } | undefined> {
    const current = this.#session
    const wanted = Math.min(65_535, this.#options.receiveMaximum ?? this.#largestMax)
    // A larger batch than the connection's Receive Maximum connects again, once nothing of the
    // old connection is in hand (its PUBACKs could not be sent any more).
    if (current?.isAlive && (current.receiveMaximum >= wanted || this.#inHand.size > 0))
      return { session: current, isNew: false }
    if (current !== undefined) await this.#lost(current)
    const session = await this.#withBroker(
      () => Session.open(this.#url, wanted, this.#options.connectTimeoutMs ?? 10_000),
      signal,
    )
    if (session === undefined) return undefined
    if (this.#closing.signal.aborted) {
      await session.close()
      return undefined
    }
    this.#session = session
    // What was released on an earlier connection is resent on this one.
    this.#releasedDue = undefined
    this.#log.info("source-connected", { source: this.describe })
    return { session, isNew: true }
  }

  async #lost(session: Session): Promise<void> {
    if (this.#session === session) this.#session = undefined
    if (!this.#closing.signal.aborted && session.lostBecause !== undefined)
      this.#log.warn("source-lost", { source: this.describe, error: describeFailure(session.lostBecause) })
    await session.close()
  }

  async #publishOne(origin: Origin, body: Uint8Array): Promise<void> {
    for (;;) {
      const code = await this.#withBroker(() => this.#publisher.publish(origin, body))
      if (code === undefined) throw new Error(`${this.describe}: publish after close`)
      if (code === "lost") continue
      if (code === 0x10)
        throw new SpoolError(
          "refused",
          `${this.describe}: no subscription takes messages on topic ${JSON.stringify(origin.address)}, so the ` +
            "broker dropped the replay; start the consumer's session (consume --source) first, then replay again",
        )
      return
    }
  }

  // Runs `use`, connecting as it needs. A refusal the broker would repeat is thrown at once; any
  // other failure is tried again with backoff until the outage lasts longer than the policy
  // allows. Undefined when `signal` aborts or the source closes meanwhile.
  async #withBroker<T>(use: () => Promise<T>, signal?: AbortSignal): Promise<T | undefined> {
    let attempt = 0
    for (;;) {
      if (signal?.aborted || this.#closing.signal.aborted) return undefined
      try {
        const result = await use()
        this.#backoff.reset()
        return result
      } catch (error) {
        if (this.#closing.signal.aborted) return undefined
        if (error instanceof SpoolError) throw error
        const refused = refusalOf(error)
        if (refused !== undefined)
          throw new SpoolError("usage", `${this.describe}: the broker refused the connection: ${refused}`, {
            cause: error,
          })
        const now = Date.now()
        const delay = this.#backoff.next(now)
        const because = describeFailure(error)
        if (delay === undefined)
          throw new SpoolError(
            "io",
            `${this.describe}: the MQTT broker could not be reached for ${Math.round(this.#backoff.elapsed(now) / 1000)} s ` +
              `(${because}); check that it runs and that the URL's host and port are right`,
            { cause: error },
          )
        attempt++
        this.#log.warn("source-retry", { source: this.describe, attempt, delay_ms: Math.round(delay), error: because })
        await sleep(delay, AbortSignal.any([this.#closing.signal, ...(signal ? [signal] : [])]))
      }
    }
  }
}

function describeFailure(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
