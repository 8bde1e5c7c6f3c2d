// One consumer on one channel: what the broker pushed to it, and which of those are still
// unsettled. A channel's delivery tags mean nothing on any other channel, so when the channel
// goes, everything it delivered goes with it: the broker puts those messages back in the queue
// and delivers them again, and acking them anywhere else would be an error (PRECONDITION_FAILED,
// unknown delivery tag, which closes the channel it is sent on).
import type { Channel, ChannelModel, ConsumeMessage } from "amqplib"
import { closeQuietly } from "./close.ts"

/** Why a wait for the first delivery ended. */
export type Arrival = "arrived" | "timeout" | "lost" | "aborted"

/** A consumer on its own channel, with prefetch bounding what the broker sends ahead of acks. */
export class Subscription {
  readonly prefetch: number
  readonly #channel: Channel
  #alive = true
  #closing = false
  #lostBecause: unknown
  // Pushed by the broker, not yet handed over by take(), oldest first.
  readonly #arrived: ConsumeMessage[] = []
  // Delivered on this channel and neither acked nor handed back, by delivery tag: the arrived
  // ones and the ones taken. Never more than `prefetch`: the broker counts the same.
  readonly #unsettled = new Map<number, ConsumeMessage>()
  #wake: (() => void) | undefined

  private constructor(channel: Channel, prefetch: number) {
    this.#channel = channel
    this.prefetch = prefetch
  }

  /**
   * Opens a channel on `connection` and consumes `queue` with manual acks and a per-consumer
   * prefetch. Rejects with amqplib's error (its `code` is the AMQP reply code: 404 for a queue
   * that does not exist) when the broker refuses.
   */
  static async start(connection: ChannelModel, queue: string, prefetch: number): Promise<Subscription> {
    const channel = await connection.createChannel()
    const subscription = new Subscription(channel, prefetch)
    channel.on("error", (error: unknown) => subscription.#lose(error))
    channel.on("close", () => subscription.#lose(new Error("the channel closed")))
    try {
      // global=false: the limit is this consumer's, which is the only kind quorum queues know.
      await channel.prefetch(prefetch, false)
      await channel.consume(queue, (message) => subscription.#arrive(message), { noAck: false })
    } catch (error) {
      subscription.#lose(error)
      await closeQuietly(channel)
      throw error
    }
    return subscription
  }

  /** False once the channel is gone: nothing it delivered can be settled any more. */
  get isAlive(): boolean {
    return this.#alive
  }

  /** Why the channel went, when it did not go by close(). */
  get lostBecause(): unknown {
    return this.#lostBecause
  }

  /** How many deliveries are waiting to be taken. */
  get waiting(): number {
    return this.#arrived.length
  }

  /** How many deliveries this channel holds unsettled, taken or not. */
  get unsettled(): number {
    return this.#unsettled.size
  }

  /**
   * Waits up to `ms` for a delivery to be waiting. Resolves at once when one is, and early
   * when the channel goes or a signal aborts.
   */
  waitForArrival(ms: number, ...signals: readonly (AbortSignal | undefined)[]): Promise<Arrival> {
    return new Promise((resolve) => {
      const finish = (arrival: Arrival) => {
        clearTimeout(timer)
        this.#wake = undefined
        for (const signal of signals) signal?.removeEventListener("abort", aborted)
        resolve(arrival)
      }
      const aborted = () => finish("aborted")
      if (!this.#alive) return resolve("lost")
      if (this.#arrived.length > 0) return resolve("arrived")
      if (signals.some((signal) => signal?.aborted)) return resolve("aborted")
      const timer = setTimeout(() => finish("timeout"), Math.max(0, ms))
      this.#wake = () => finish(this.#alive ? "arrived" : "lost")
      for (const signal of signals) signal?.addEventListener("abort", aborted, { once: true })
    })
  }

  /**
   * Lets the deliveries already on their way in be read, without waiting for new ones: yields
   * to the event loop, which reads what the socket holds, until a turn brings nothing more or
   * `max` are waiting. The broker writes a burst back to back, so one receive takes the burst
   * instead of its first message.
   */
  async gather(max: number): Promise<void> {
    let seen = -1
    while (this.#alive && this.#arrived.length < max && this.#arrived.length !== seen) {
      seen = this.#arrived.length
      await new Promise<void>((resolve) => setImmediate(resolve))
    }
  }

  /** Hands over up to `max` waiting deliveries, oldest first; they stay unsettled. */
  take(max: number): ConsumeMessage[] {
    return this.#arrived.splice(0, max)
  }

  /**
   * Acks (or hands back to the queue, `requeue`) the messages this channel delivered and has
   * not settled; any other is skipped, since settling it twice, or on a channel that is gone,
   * is the broker error this class exists to avoid. AMQP answers neither: the frames are
   * written, and the broker applies them in order before it answers any later request on the
   * channel.
   */
  settle(messages: readonly ConsumeMessage[], how: "ack" | "requeue"): void {
    if (!this.#alive) return
    const tags: number[] = []
    for (const message of messages) {
      const tag = message.fields.deliveryTag
      if (this.#unsettled.get(tag) !== message) continue
      this.#unsettled.delete(tag)
      tags.push(tag)
    }
    if (tags.length === 0) return
    tags.sort((a, b) => a - b)
    const top = tags[tags.length - 1] as number
    // One frame with `multiple` settles every unsettled tag up to `top`: right when none of
    // those is being kept, which is the usual case of a whole batch acked after its commit.
    const isContiguous = ![...this.#unsettled.keys()].some((tag) => tag < top)
    const frames = isContiguous ? [top] : tags
    try {
      for (const tag of frames) {
        const message = { fields: { deliveryTag: tag } } as ConsumeMessage
        if (how === "ack") this.#channel.ack(message, isContiguous)
        else this.#channel.nack(message, isContiguous, true)
      }
    } catch (error) {
      // The channel closed between the check above and the write (amqplib's IllegalOperationError):
      // those deliveries come back by themselves.
      this.#lose(error)
    }
  }

  /**
   * Closes the channel. The broker answers the close after it has applied every ack written
   * before it, so awaiting this is what makes acks durable (a connection closed right after
   * an ack can lose it); whatever is still unsettled goes back to the queue.
   */
  async close(): Promise<void> {
    if (!this.#alive) return
    this.#closing = true
    await closeQuietly(this.#channel)
    this.#lose(undefined)
  }

  #arrive(message: ConsumeMessage | null): void {
    if (message === null) {
      // The broker cancelled the consumer (the queue was deleted): end the channel so that
      // the next receive subscribes again and finds out why.
      this.#lose(new Error("the broker cancelled the consumer"))
      void closeQuietly(this.#channel)
      return
    }
    if (!this.#alive) return
    this.#arrived.push(message)
    this.#unsettled.set(message.fields.deliveryTag, message)
    this.#wake?.()
  }

  #lose(reason: unknown): void {
    if (!this.#alive) return
    this.#alive = false
    if (!this.#closing) this.#lostBecause = reason
    this.#arrived.length = 0
    this.#unsettled.clear()
    this.#wake?.()
  }
}
