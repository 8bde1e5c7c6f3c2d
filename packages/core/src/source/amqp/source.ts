// A RabbitMQ queue as a source (AMQP 0-9-1 through amqplib).
//
// Receiving: one consumer with manual acks and a per-consumer prefetch equal to the batch size,
// so the broker never has more than one batch unacknowledged with this process, handed over or
// not. basic.get would hold nothing beyond what was asked, but it costs a round trip per
// message and, on a quorum queue, a consensus write per message: measured on a local broker it
// was several times slower than a consumer on a classic queue, and on a quorum queue slower by
// far more than a ledger commit costs. The price of the consumer: after a batch that was not
// full, the broker pushes the rest of the prefetch while that batch is in hand, so those wait
// in memory for the next receive, and are redelivered (their redelivered flag set, a quorum
// queue's count raised) if the process dies before it takes them.
//
// What bounds a batch: RabbitMQ closes a consumer's channel when a delivery stays unacked
// longer than its consumer timeout (`consumer_timeout`, 30 minutes by default, set per broker
// and, on newer brokers, per queue). Nothing from the client extends it, so keepAlive is a no-op: a
// batch must be committed and acked within it, counting the wait of deliveries that arrived
// while the batch before was in hand. Past it the channel closes, the batch's acks become
// no-ops and its messages come again, which the ledger recognises.
//
// Losing the broker: a lost channel or connection is noticed by the next receive or publish,
// which connects and subscribes again with backoff (ReconnectPolicy) and fails once an outage
// lasts longer than the policy allows. Deliveries of the lost channel cannot be acked or handed
// back on any other: ack and release skip them, and the broker delivers them again, redelivered.
//
// Closing: the consumer's channel is closed before the connection. The broker answers a
// channel close only after it has applied every ack sent before it on that channel, while a
// connection closed right after an ack can drop it. One known exception is the broker's:
// quorum queues may requeue a message whose ack arrived just before its channel closed
// (github.com/rabbitmq/rabbitmq-server/issues/10327); that message comes again and the
// ledger recognises it.
import { type ChannelModel, type ConfirmChannel, type ConsumeMessage, connect } from "amqplib"
import { fault } from "../../_fault.ts"
import { SpoolError } from "../../errors.ts"
import { type Log, silentLog } from "../../log.ts"
import { Backoff, type OpenWait, type ReconnectPolicy, sleep } from "../backoff.ts"
import type { Delivery, Origin, SourcePort } from "../port.ts"
import { closeQuietly } from "./close.ts"
import { publishOptions, toDelivery } from "./delivery.ts"
import { describeFailure, describeRefusal, isPermanent } from "./failure.ts"
import { Subscription } from "./subscription.ts"
import { type AmqpUrl, parseAmqpUrl } from "./url.ts"

/** How an AMQP source connects and receives. */
export interface AmqpSourceOptions extends OpenWait {
  /**
   * Deliveries the broker may push ahead of acks (the consumer's prefetch). Default: the
   * largest `max` a receive has asked for, so a source never holds more than one batch.
   */
  readonly prefetch?: number
  /** How a lost broker is tried again; see ReconnectPolicy for the defaults. */
  readonly reconnect?: ReconnectPolicy
  /** Where losses and reconnections are reported (warn) and connections made (info). */
  readonly log?: Log
  /** The connection's name in rabbitmqctl and the management UI; default `spool QUEUE`. */
  readonly connectionName?: string
  /** How long one attempt to connect may take; default 10 s. */
  readonly connectTimeoutMs?: number
}

/**
 * Opens the RabbitMQ queue of `url` (see url.ts) as a source. Connects and checks that the
 * queue exists before it resolves, so a wrong URL fails here; an unreachable broker is tried
 * again as the reconnect policy says.
 */
export async function openAmqpSource(url: string, options: AmqpSourceOptions = {}): Promise<SourcePort> {
  const source = new AmqpSource(parseAmqpUrl(url), options)
  try {
    await source.checkQueue(options.signal)
    options.signal?.throwIfAborted()
  } catch (error) {
    await source.close()
    throw error
  }
  return source
}

interface Handle {
  readonly subscription: Subscription
  readonly message: ConsumeMessage
}

class AmqpSource implements SourcePort {
  readonly describe: string
  readonly #url: AmqpUrl
  readonly #options: AmqpSourceOptions
  readonly #log: Log
  readonly #backoff: Backoff
  readonly #closing = new AbortController()
  readonly #handles = new WeakMap<Delivery, Handle>()
  #connection: ChannelModel | undefined
  #connecting: Promise<ChannelModel> | undefined
  #subscription: Subscription | undefined
  #publisher: ConfirmChannel | undefined
  #publishing: Promise<unknown> = Promise.resolve()
  #largestMax = 0
  #isReceiving = false
  #closed: Promise<void> | undefined

  constructor(url: AmqpUrl, options: AmqpSourceOptions) {
    this.#url = url
    this.describe = url.describe
    this.#options = options
    this.#log = options.log ?? silentLog
    this.#backoff = new Backoff(options.reconnect)
  }

  /** Fails with a SpoolError when the queue does not exist or the broker refuses this URL. */
  async checkQueue(signal?: AbortSignal): Promise<void> {
    await this.#withBroker(async (connection) => {
      const channel = await connection.createChannel()
      channel.on("error", () => {}) // a 404 closes the channel; the rejected promise says why
      await channel.checkQueue(this.#url.queue)
      await closeQuietly(channel)
    }, signal)
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
        const subscribed = await this.#subscribed(signal)
        if (subscribed === undefined) return []
        const { subscription, isNew } = subscribed
        // A consumer that has just subscribed gets its first deliveries a moment later; the
        // wait starts from there, or a broker that was away would end a drain as if empty.
        if (isNew) deadline = Math.max(deadline, Date.now() + waitMs)
        const arrival = await subscription.waitForArrival(deadline - Date.now(), signal, this.#closing.signal)
        if (arrival === "timeout" || arrival === "aborted") return []
        if (arrival === "lost") {
          this.#lost(subscription)
          continue
        }
        await subscription.gather(max)
        if (!subscription.isAlive) {
          this.#lost(subscription)
          continue
        }
        return subscription.take(max).map((message) => this.#deliver(subscription, message))
      }
    } finally {
      this.#isReceiving = false
    }
  }

  async ack(deliveries: readonly Delivery[]): Promise<void> {
    this.#settle(deliveries, "ack")
  }

  /** Requeues at once: AMQP 0-9-1 has no delayed requeue, so `delayMs` is not honoured here. */
  async release(deliveries: readonly Delivery[], _delayMs?: number): Promise<void> {
    this.#settle(deliveries, "requeue")
  }

  async keepAlive(_deliveries: readonly Delivery[]): Promise<void> {}

  publish(origin: Origin, body: Uint8Array): Promise<void> {
    if (this.#closed) return Promise.reject(new Error(`${this.describe}: publish after close`))
    // One publish at a time: a basic.return then belongs to the one message in flight.
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
    const subscription = this.#subscription
    this.#subscription = undefined
    await subscription?.close()
    if (this.#publisher !== undefined) await closeQuietly(this.#publisher)
    this.#publisher = undefined
    await this.#connecting?.catch(() => {})
    if (this.#connection !== undefined) await closeQuietly(this.#connection)
    this.#connection = undefined
  }

  #deliver(subscription: Subscription, message: ConsumeMessage): Delivery {
    const delivery = toDelivery(message, this.#url.queue, this.describe)
    this.#handles.set(delivery, { subscription, message })
    return delivery
  }

  #settle(deliveries: readonly Delivery[], how: "ack" | "requeue"): void {
    const bySubscription = new Map<Subscription, ConsumeMessage[]>()
    for (const delivery of deliveries) {
      const handle = this.#handles.get(delivery)
      if (handle === undefined) throw new Error(`${this.describe}: ${delivery.id} was not received from this source`)
      const messages = bySubscription.get(handle.subscription) ?? []
      messages.push(handle.message)
      bySubscription.set(handle.subscription, messages)
    }
    // A subscription that is gone skips its messages: the broker delivers them again.
    for (const [subscription, messages] of bySubscription) subscription.settle(messages, how)
  }

  // The live consumer, subscribing (and connecting) first when there is none; undefined when
  // aborted or closed meanwhile.
  async #subscribed(signal?: AbortSignal): Promise<{ subscription: Subscription; isNew: boolean } | undefined> {
    const current = this.#subscription
    const prefetch = this.#options.prefetch ?? this.#largestMax
    // A larger batch than the consumer's prefetch subscribes again, once nothing of the old
    // consumer is in hand (closing its channel would make those deliveries unackable).
    if (current?.isAlive && (current.prefetch >= prefetch || current.unsettled > 0))
      return { subscription: current, isNew: false }
    if (current?.isAlive) await current.close()
    else if (current !== undefined) this.#lost(current)
    this.#subscription = undefined
    const subscription = await this.#withBroker(
      (connection) => Subscription.start(connection, this.#url.queue, prefetch),
      signal,
    )
    if (subscription === undefined) return undefined
    if (this.#closing.signal.aborted) {
      await subscription.close()
      return undefined
    }
    this.#subscription = subscription
    return { subscription, isNew: true }
  }

  #lost(subscription: Subscription): void {
    if (this.#subscription === subscription) this.#subscription = undefined
    // A lost connection was reported when it closed (which closes its channels first); what is
    // left to report is a channel the broker closed on a live connection.
    if (!this.#closing.signal.aborted && this.#connection !== undefined)
      this.#log.warn("source-lost", { source: this.describe, error: describeFailure(subscription.lostBecause) })
  }

  async #publishOne(origin: Origin, body: Uint8Array): Promise<void> {
    const channel = await this.#withBroker((connection) => this.#publisherOn(connection))
    if (channel === undefined) throw new Error(`${this.describe}: publish after close`)
    await new Promise<void>((resolve, reject) => {
      let returned: string | undefined
      const onReturn = (message: { fields: { replyText?: string } }) => {
        returned = message.fields.replyText ?? "returned"
      }
      channel.on("return", onReturn)
      channel.publish("", origin.address, Buffer.from(body), publishOptions(origin), (error: unknown) => {
        channel.off("return", onReturn)
        if (error)
          reject(
            new SpoolError("io", `${this.describe}: the broker did not confirm the message to ${origin.address}`, {
              cause: error,
            }),
          )
        else if (returned !== undefined)
          reject(
            new SpoolError(
              "not-a-queue",
              `${this.describe}: no queue named ${JSON.stringify(origin.address)} took the message (${returned}); ` +
                "declare the queue, or publish to one that exists",
            ),
          )
        else resolve()
      })
    })
  }

  async #publisherOn(connection: ChannelModel): Promise<ConfirmChannel> {
    if (this.#publisher !== undefined) return this.#publisher
    const channel = await connection.createConfirmChannel()
    channel.on("error", () => {}) // the pending confirm's callback gets the error
    channel.on("close", () => {
      if (this.#publisher === channel) this.#publisher = undefined
    })
    this.#publisher = channel
    return channel
  }

  // Runs `use` on a live connection, connecting first when there is none. A failure the broker
  // would repeat (a missing queue, a refused login) is thrown at once; any other is tried again
  // with backoff until the outage lasts longer than the policy allows. Undefined when `signal`
  // aborts or the source closes meanwhile.
  async #withBroker<T>(use: (connection: ChannelModel) => Promise<T>, signal?: AbortSignal): Promise<T | undefined> {
    let attempt = 0
    for (;;) {
      if (signal?.aborted || this.#closing.signal.aborted) return undefined
      try {
        const result = await use(await this.#connected())
        this.#backoff.reset()
        return result
      } catch (error) {
        if (this.#closing.signal.aborted) return undefined
        if (isPermanent(error)) throw this.#refusal(error)
        const now = Date.now()
        const delay = this.#backoff.next(now)
        const because = describeFailure(error)
        if (delay === undefined)
          throw new SpoolError(
            "io",
            `${this.describe}: RabbitMQ could not be reached for ${Math.round(this.#backoff.elapsed(now) / 1000)} s ` +
              `(${because}); check that it runs and that the URL's host and port are right`,
            { cause: error },
          )
        attempt++
        this.#log.warn("source-retry", { source: this.describe, attempt, delay_ms: Math.round(delay), error: because })
        await sleep(delay, AbortSignal.any([this.#closing.signal, ...(signal ? [signal] : [])]))
      }
    }
  }

  #connected(): Promise<ChannelModel> {
    if (this.#connection !== undefined) return Promise.resolve(this.#connection)
    this.#connecting ??= this.#connect().finally(() => {
      this.#connecting = undefined
    })
    return this.#connecting
  }

  async #connect(): Promise<ChannelModel> {
    const connection = await connect(this.#url.connectUrl, {
      timeout: this.#options.connectTimeoutMs ?? 10_000,
      clientProperties: { connection_name: this.#options.connectionName ?? `spool ${this.#url.queue}` },
    })
    // amqplib emits 'error' before 'close' on a failure; without a listener it would throw.
    connection.on("error", () => {})
    connection.on("close", (error?: unknown) => {
      if (this.#connection !== connection) return
      this.#connection = undefined
      this.#publisher = undefined
      if (!this.#closing.signal.aborted)
        this.#log.warn("source-lost", { source: this.describe, error: describeFailure(error ?? "connection closed") })
    })
    if (this.#closing.signal.aborted) {
      await closeQuietly(connection)
      throw new Error(`${this.describe}: closed while connecting`)
    }
    this.#connection = connection
    this.#log.info("source-connected", { source: this.describe })
    return connection
  }

  #refusal(error: unknown): SpoolError {
    return new SpoolError(...describeRefusal(error, this.#url), { cause: error })
  }
}
