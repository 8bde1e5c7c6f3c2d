// A NATS JetStream source: deliveries pulled from a durable pull consumer, exactly as many as a
// batch takes (pull.ts), acknowledged with confirmed acks that survive a dropped connection
// (acks.ts). A delivery's id is its stream sequence, the same on every redelivery.

import { fileURLToPath } from "node:url"
import {
  type Consumer,
  JetStreamApiCodes,
  type JetStreamClient,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream"
import { type MsgHdrs, nanos, headers as natsHeaders, nuid } from "@nats-io/transport-node"
import { fault } from "../../_fault.ts"
import { SpoolError } from "../../errors.ts"
import { type Log, silentLog } from "../../log.ts"
import type { OpenWait } from "../backoff.ts"
import { type Delivery, type KeeperSpec, type Origin, replayHeader, type SourcePort } from "../port.ts"
import { Acknowledger, isTransient, replyOf } from "./acks.ts"
import { connectFirst } from "./connect.ts"
import { ensureConsumer, isApiError } from "./consumer.ts"
import type { JetStreamKeeperOptions } from "./keeper.ts"
import { Link } from "./link.ts"
import { minExpiresMs, pullOnce } from "./pull.ts"
import { type JetStreamUrl, parseJetStreamUrl } from "./url.ts"

/** Tuning for a JetStream source; the defaults suit a consumer that calls `keepAlive` while it works. */
export interface JetStreamSourceOptions extends OpenWait {
  /** ack_wait of a consumer spool creates (an existing one keeps its own); default 30 s. */
  readonly ackWaitMs?: number
  /** How long one request to the server (an ack, a publish) may take before it is sent again; default 5 s. */
  readonly timeoutMs?: number
  /** How long the connection may stay down before `receive` and `publish` give up with an error; default 60 s. */
  readonly outageMs?: number
  /** The connection's name, as the server's monitoring shows it; default "spool". */
  readonly name?: string
  /** Where waiting for a server out of reach at the start is reported (`source-retry`). */
  readonly log?: Log
}

/** A JetStream source as the engine uses it, plus what it needs to pace `keepAlive`. */
export interface JetStreamSource extends SourcePort {
  /** The consumer's ack_wait: a delivery not kept alive within it is redelivered to another consumer. */
  readonly ackWaitMs: number
  /** Hands deliveries back, to be redelivered at once or, with `delayMs`, no sooner than that (JetStream's delayed nak). */
  release(deliveries: readonly Delivery[], delayMs?: number): Promise<void>
}

/**
 * Connects to the JetStream source `url` (`nats://host:4222/?stream=ORDERS&consumer=spool`):
 * checks the stream, creates the durable pull consumer when it is missing, and returns the source.
 * A server out of reach is waited for up to `outageMs` (connect.ts).
 */
export async function openJetStreamSource(url: string, options: JetStreamSourceOptions = {}): Promise<JetStreamSource> {
  const parsed = parseJetStreamUrl(url)
  const timeoutMs = options.timeoutMs ?? 5000
  const outageMs = options.outageMs ?? 60_000
  const nc = await connectFirst(parsed, {
    name: options.name ?? "spool",
    timeoutMs,
    outageMs,
    log: options.log ?? silentLog,
    ...(options.signal !== undefined ? { signal: options.signal } : {}),
  })
  try {
    const jsm = await jetstreamManager(nc, { timeout: timeoutMs }).catch((cause: unknown) => {
      if (isJetStreamMissing(cause))
        throw new SpoolError("usage", `JetStream is not enabled at ${parsed.describe}: start nats-server with -js`, {
          cause,
        })
      throw cause
    })
    const info = await ensureConsumer(jsm, parsed, options.ackWaitMs ?? 30_000)
    const js = jetstream(nc, { timeout: timeoutMs })
    const consumer = await js.consumers.get(parsed.stream, parsed.consumer)
    return new NatsJetStreamSource(parsed, new Link(nc), js, consumer, {
      ackWaitMs: (info.config.ack_wait ?? nanos(30_000)) / 1_000_000,
      timeoutMs,
      outageMs,
      keeper: keeperOf(parsed, options.name ?? "spool", timeoutMs),
    })
  } catch (error) {
    await nc.close()
    if (error instanceof SpoolError) throw error
    throw new SpoolError("io", `cannot open the JetStream source ${parsed.describe}: ${messageOf(error)}`, {
      cause: error,
    })
  }
}

class NatsJetStreamSource implements JetStreamSource {
  readonly describe: string
  readonly ackWaitMs: number
  readonly keepAliveWithinMs: number
  readonly keeper: KeeperSpec
  private readonly timeoutMs: number
  private readonly outageMs: number
  private readonly messages = new WeakMap<Delivery, JsMsg>()
  private readonly acks: Acknowledger

  constructor(
    private readonly url: JetStreamUrl,
    private readonly link: Link,
    private readonly js: JetStreamClient,
    private readonly consumer: Consumer,
    tuning: { ackWaitMs: number; timeoutMs: number; outageMs: number; keeper: KeeperSpec },
  ) {
    this.describe = url.describe
    this.ackWaitMs = tuning.ackWaitMs
    this.keepAliveWithinMs = tuning.ackWaitMs
    this.keeper = tuning.keeper
    this.timeoutMs = tuning.timeoutMs
    this.outageMs = tuning.outageMs
    this.acks = new Acknowledger(link, tuning.timeoutMs, tuning.outageMs)
  }

  /** As the port says; a JetStream pull request lasts 1 s at the least, so a `waitMs` under that waits 1 s. */
  async receive(max: number, waitMs: number, signal?: AbortSignal): Promise<Delivery[]> {
    this.checkOpen()
    if (max < 1) return []
    const first = await this.waitForFirst(waitMs, signal)
    if (first === undefined) return []
    // The first message says how many wait undelivered behind it, so the second request asks for
    // no more than the server holds and ends at once, instead of holding the first in hand while
    // it waits out its expiry (ack_wait runs meanwhile). Redeliveries are not counted there: after
    // the backlog they come one per batch.
    const more = Math.min(max - 1, first.info.pending)
    const rest =
      more > 0 && !signal?.aborted ? await pullOnce(this.consumer, this.link, more, minExpiresMs, signal) : undefined
    return latestDeliveries([first, ...(rest?.messages ?? [])]).map((message) => this.toDelivery(message))
  }

  ack(deliveries: readonly Delivery[]): Promise<void> {
    return this.acks.ack(deliveries.map((delivery) => this.heldMessage(delivery)))
  }

  release(deliveries: readonly Delivery[], delayMs?: number): Promise<void> {
    return this.acks.release(
      deliveries.map((delivery) => this.heldMessage(delivery)),
      delayMs,
    )
  }

  keepAlive(deliveries: readonly Delivery[]): Promise<void> {
    return this.acks.keepAlive(deliveries.map((delivery) => this.heldMessage(delivery)))
  }

  async publish(origin: Origin, body: Uint8Array): Promise<void> {
    const replayed = replayHeaders(origin.headers)
    // One id for every attempt of this publish: the stream drops a retry whose first attempt landed
    // (and, within its duplicate window, a replay published again after a crash).
    const replayOf = origin.headers?.[replayHeader]
    const msgID = replayOf === undefined ? nuid.next() : `replay-${replayOf}`
    const giveUp = Date.now() + this.outageMs
    for (;;) {
      this.checkOpen()
      if (!(await this.link.whenConnected(giveUp))) throw this.unreachable()
      try {
        await this.js.publish(origin.address, body, {
          msgID,
          expect: { streamName: this.url.stream },
          timeout: this.timeoutMs,
          ...(replayed !== undefined ? { headers: replayed } : {}),
        })
        fault("after-publish")
        return
      } catch (cause) {
        // The client reports "no responders" to a publish this way: no stream listens on the subject.
        if (isJetStreamMissing(cause))
          throw new SpoolError(
            "usage",
            `no JetStream stream stores subject "${origin.address}" at ${this.describe}: add it to the subjects of stream ${this.url.stream}`,
            { cause },
          )
        if (!isTransient(cause) || Date.now() >= giveUp)
          throw new SpoolError(
            "io",
            `publishing to "${origin.address}" at ${this.describe} failed: ${messageOf(cause)}`,
            {
              cause,
            },
          )
      }
    }
  }

  async close(): Promise<void> {
    if (this.link.nc.isClosed()) return
    await this.acks.settle(2 * this.timeoutMs)
    this.link.close()
    // drain() flushes what was written (naks, keep-alives) before it closes; a connection that
    // is down has nothing to flush, and close() ends it at once.
    // A timer, not Bun.sleep: a pending sleep would hold the process open for the whole timeout.
    let timer: ReturnType<typeof setTimeout> | undefined
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.timeoutMs)
    })
    await Promise.race([this.link.nc.drain().catch(() => {}), timeout])
    clearTimeout(timer)
    if (!this.link.nc.isClosed()) await this.link.nc.close()
  }

  private async waitForFirst(waitMs: number, signal?: AbortSignal): Promise<JsMsg | undefined> {
    let failingSince: number | undefined
    for (;;) {
      if (signal?.aborted) return undefined
      this.checkOpen()
      if (!(await this.link.whenConnected(Date.now() + this.outageMs, signal))) {
        if (signal?.aborted) return undefined
        this.checkOpen()
        throw this.unreachable()
      }
      const pulled = await pullOnce(this.consumer, this.link, 1, waitMs, signal)
      const [first] = pulled.messages
      if (first !== undefined) return first
      if (!pulled.isInterrupted || signal?.aborted) return undefined
      // Interrupted (a dropped connection, an error): the wait starts over on a live connection, so
      // that [] keeps meaning "nothing came for waitMs", which ends a drain.
      if (pulled.error === undefined) continue
      await this.checkConsumer(pulled.error)
      failingSince ??= Date.now()
      if (Date.now() - failingSince > this.outageMs)
        throw new SpoolError("io", `receiving from ${this.describe} keeps failing: ${messageOf(pulled.error)}`, {
          cause: pulled.error,
        })
      await Bun.sleep(500)
    }
  }

  /** Throws when a failed pull is explained by the consumer or stream being gone. */
  private async checkConsumer(cause: unknown): Promise<void> {
    this.checkOpen()
    try {
      await this.consumer.info()
    } catch (error) {
      if (isApiError(error, JetStreamApiCodes.ConsumerNotFound) || isApiError(error, JetStreamApiCodes.StreamNotFound))
        throw new SpoolError(
          "io",
          `the consumer "${this.url.consumer}" of stream "${this.url.stream}" is gone from ${this.describe} ` +
            "(deleted while spool read it); start again to recreate it",
          { cause },
        )
    }
  }

  private toDelivery(message: JsMsg): Delivery {
    const { info } = message
    const headers = textHeaders(message.headers)
    const replayOf = headers?.[replayHeader]
    const reply = replyOf(message)
    const delivery: Delivery = {
      id: `${info.stream}:${replayOf === undefined ? info.streamSequence : `replay-${replayOf}`}`,
      stableId: true,
      body: message.data.slice(),
      deliveryCount: info.deliveryCount,
      redelivered: info.redelivered,
      origin: { source: this.describe, address: message.subject, ...(headers !== undefined ? { headers } : {}) },
      ...(reply !== undefined ? { keepToken: reply } : {}),
    }
    this.messages.set(delivery, message)
    return delivery
  }

  private heldMessage(delivery: Delivery): JsMsg {
    const message = this.messages.get(delivery)
    if (message === undefined) throw new Error(`delivery ${delivery.id} was not received from ${this.describe}`)
    return message
  }

  private checkOpen(): void {
    if (!this.link.isOpen) throw new SpoolError("io", `the JetStream source ${this.describe} is closed`)
  }

  private unreachable(): SpoolError {
    return new SpoolError("io", `NATS at ${this.describe} has been unreachable for ${this.outageMs / 1000} s`)
  }
}

/** The keeper of a source at `url`: ./keeper.ts, connecting as the source does. */
function keeperOf(url: JetStreamUrl, name: string, timeoutMs: number): KeeperSpec {
  const options: JetStreamKeeperOptions = {
    server: url.server,
    name,
    timeoutMs,
    ...(url.user !== undefined ? { user: url.user } : {}),
    ...(url.pass !== undefined ? { pass: url.pass } : {}),
    ...(url.token !== undefined ? { token: url.token } : {}),
  }
  return { module: fileURLToPath(new URL("./keeper.ts", import.meta.url)), options }
}

/**
 * One delivery per message: when ack_wait ran out while a request was still open, the server
 * sent the message again into the same batch, and only its latest delivery is kept.
 */
function latestDeliveries(messages: readonly JsMsg[]): JsMsg[] {
  const latest = new Map<number, JsMsg>()
  for (const message of messages) latest.set(message.info.streamSequence, message)
  return messages.filter((message) => latest.get(message.info.streamSequence) === message)
}

function textHeaders(headers: MsgHdrs | undefined): Record<string, string> | undefined {
  if (headers === undefined) return undefined
  const text: Record<string, string> = {}
  for (const [key, values] of headers) text[key] = values.join(", ")
  return Object.keys(text).length > 0 ? text : undefined
}

/**
 * The headers a replay publishes: the message's own, without the ones the server acts on
 * (`Nats-Msg-Id` would have the stream drop the replay as a duplicate of the original,
 * `Nats-Expected-*` would have it refused).
 */
function replayHeaders(headers: Readonly<Record<string, string>> | undefined): MsgHdrs | undefined {
  const kept = Object.entries(headers ?? {}).filter(([key]) => !key.toLowerCase().startsWith("nats-"))
  if (kept.length === 0) return undefined
  const replayed = natsHeaders()
  for (const [key, value] of kept) replayed.set(key, value)
  return replayed
}

function isJetStreamMissing(error: unknown): boolean {
  return (
    (error instanceof Error && error.name === "JetStreamNotEnabled") ||
    isApiError(error, JetStreamApiCodes.JetStreamNotEnabledForAccount)
  )
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
