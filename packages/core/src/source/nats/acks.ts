// Acknowledgements that survive a dropped connection. The client discards what it writes into a
// dying socket without an error, and its ack and nak latch (a second call sends nothing), so
// each acknowledgement is confirmed by the server and, when the connection dropped before the
// confirmation came, sent again as a plain request on the delivery's reply subject once the
// connection is back. The server takes an acknowledgement twice without harm.
import type { JsMsg } from "@nats-io/jetstream"
import { errors, nanos } from "@nats-io/transport-node"
import type { Link } from "./link.ts"

/** Sends acks, naks and keep-alives for messages in hand, each until the server confirmed it. */
export class Acknowledger {
  private readonly inFlight = new Set<Promise<unknown>>()

  constructor(
    private readonly link: Link,
    private readonly timeoutMs: number,
    private readonly outageMs: number,
  ) {}

  /**
   * Acks with JetStream's confirmed ack. Resolves once every ack is confirmed, or refused for
   * good (the consumer is gone), or the connection stayed down for the outage budget: an
   * unconfirmed ack is not an error, the message comes again and the ledger recognises it.
   */
  async ack(messages: readonly JsMsg[]): Promise<void> {
    await this.track(Promise.all(messages.map((message) => this.ackOne(message))))
  }

  /** Naks, for a redelivery at once or, with `delayMs`, no sooner than that. */
  async release(messages: readonly JsMsg[], delayMs?: number): Promise<void> {
    const delay = delayMs !== undefined && delayMs > 0 ? delayMs : undefined
    for (const message of messages) message.nak(delay)
    if (await this.isFlushed()) return
    const payload = delay === undefined ? "-NAK" : `-NAK ${JSON.stringify({ delay: nanos(delay) })}`
    await this.track(Promise.all(messages.map((message) => this.resend(message, payload))))
  }

  /** Restarts the ack_wait of each message (working()), and resolves once the server read them. */
  async keepAlive(messages: readonly JsMsg[]): Promise<void> {
    const giveUp = Date.now() + this.outageMs
    // working() carries no latch, unlike ack and nak: after a drop it is simply sent again.
    while (this.link.isOpen && (await this.link.whenConnected(giveUp))) {
      for (const message of messages) message.working()
      if (await this.isFlushed()) return
    }
  }

  /** Resolves once the acknowledgements in flight are settled, or after `ms`. */
  async settle(ms: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms)
    })
    await Promise.race([Promise.allSettled([...this.inFlight]), timeout])
    clearTimeout(timer)
  }

  private async ackOne(message: JsMsg): Promise<void> {
    if (!this.link.isOpen) return
    if (await this.isSettled(message.ackAck({ timeout: this.timeoutMs }))) return
    await this.resend(message, "+ACK")
  }

  /** Sends `payload` again as a request the server confirms, until it is settled or the outage budget is spent. */
  private async resend(message: JsMsg, payload: string): Promise<void> {
    const reply = replyOf(message)
    if (reply === undefined) return
    const giveUp = Date.now() + this.outageMs
    while (this.link.isOpen && Date.now() < giveUp && (await this.link.whenConnected(giveUp))) {
      if (await this.isSettled(this.link.nc.request(reply, payload, { timeout: this.timeoutMs }))) return
    }
  }

  /** Whether a confirmed request needs no resend: confirmed, refused for good, or the source closed. */
  private async isSettled(request: Promise<unknown>): Promise<boolean> {
    const reconnect = this.link.nextReconnect()
    request.catch(() => {})
    try {
      return await Promise.race([request.then(() => true), reconnect.reconnected.then(() => !this.link.isOpen)])
    } catch (error) {
      return !isTransient(error)
    } finally {
      reconnect.cancel()
    }
  }

  /** Whether what was written so far reached the server (a PING answered after it). */
  private async isFlushed(): Promise<boolean> {
    const reconnect = this.link.nextReconnect()
    const flush = this.link.nc.flush()
    flush.catch(() => {})
    try {
      return await Promise.race([flush.then(() => true), reconnect.reconnected.then(() => false)])
    } catch {
      return !this.link.isOpen
    } finally {
      reconnect.cancel()
    }
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work)
    return work.finally(() => this.inFlight.delete(work))
  }
}

/** Errors a request can meet on a connection that drops and comes back: worth another attempt. */
export function isTransient(error: unknown): boolean {
  if (error instanceof errors.TimeoutError) return true
  if (error instanceof errors.RequestError) return !error.isNoResponders()
  return false
}

/** A delivery's reply subject, where its acknowledgements go; the client keeps it off the public type. */
export function replyOf(message: JsMsg): string | undefined {
  const reply: unknown = (message as { reply?: unknown }).reply
  return typeof reply === "string" && reply !== "" ? reply : undefined
}
