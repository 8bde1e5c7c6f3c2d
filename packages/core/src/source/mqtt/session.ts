// One connection of the consumer's persistent MQTT session: CONNECT with clean start off, the
// session expiry and a Receive Maximum, SUBSCRIBE at QoS 1, and the PUBLISHes the broker sends,
// held unacknowledged until the source acks them.
//
// Holding a PUBACK back in MQTT.js: its QoS 1 path calls `customHandleAcks(topic, message,
// packet, done)` and sends the PUBACK when `done` is called, but it handles incoming packets one
// at a time and takes the next one only after that PUBACK is written. Keeping `done` until the
// ledger commits would stall the whole connection (later PUBLISHes, PINGRESP, SUBACK) behind the
// batch. So `done` is called at once with an error, which MQTT.js answers by sending no PUBACK
// and moving on (it emits the error, which is ignored here), and the PUBACK is written later
// by `puback`, through the client's own packet writer so that it never interleaves with the
// client's other writes.
//
// The broker resends a PUBLISH that was never PUBACKed (DUP set, same packet id) only when the
// session's next connection begins; a packet id is only meaningful on the connection that
// received it, so a PUBACK for a delivery of a lost connection is never sent on another.
import { connect, type IClientOptions, type IPublishPacket, type MqttClient } from "mqtt"
import { SpoolError } from "../../errors.ts"
import type { MqttUrl } from "./url.ts"

const heldBack = new Error("PUBACK held until the ledger commits")

// A filter no subscription of spool's uses (a `$` topic is the broker's, never a publisher's).
const barrierFilter = "$spool/ack-barrier"

// CONNACK and SUBACK reason codes the broker would give again: a bad client id, a refused login,
// a filter it does not allow.
const refusals: Readonly<Record<number, string>> = {
  132: "it does not speak MQTT 5",
  133: "it does not accept this client id",
  134: "the user name or password is wrong",
  135: "this user is not authorised",
  138: "this client id is banned",
  140: "the authentication method is not supported",
  143: "the topic filter is not valid",
  158: "shared subscriptions are not supported",
  162: "wildcard subscriptions are not supported",
}

/** The reason the broker refused, when it would refuse the same request again. */
export function refusalOf(error: unknown): string | undefined {
  const code = typeof error === "object" && error !== null && "code" in error ? error.code : undefined
  return typeof code === "number" ? refusals[code] : undefined
}

/** One live connection of the session, with what it received and has not handed over. */
export class Session {
  readonly receiveMaximum: number
  readonly #client: MqttClient
  readonly #arrived: IPublishPacket[] = []
  readonly #wake = new Set<() => void>()
  #lostBecause: unknown
  #isClosing = false
  readonly #closed: Promise<void>

  private constructor(url: MqttUrl, receiveMaximum: number, connectTimeoutMs: number) {
    this.receiveMaximum = receiveMaximum
    const options: IClientOptions = {
      protocolVersion: 5,
      clientId: url.clientId,
      clean: false,
      reconnectPeriod: 0,
      resubscribe: false,
      connectTimeout: connectTimeoutMs,
      keepalive: 30,
      ...(url.username !== undefined ? { username: url.username } : {}),
      ...(url.password !== undefined ? { password: url.password } : {}),
      // The broker sends no more than receiveMaximum PUBLISHes that wait for a PUBACK: what this
      // process holds, handed over or not, never exceeds that.
      properties: { sessionExpiryInterval: url.sessionExpirySeconds, receiveMaximum },
      customHandleAcks: (_topic, _message, packet: IPublishPacket, done) => {
        this.#arrive(packet)
        done(heldBack)
      },
    }
    this.#client = connect(url.broker, options)
    this.#closed = new Promise((resolve) => this.#client.once("close", () => resolve()))
    this.#client.on("message", (_topic, _message, packet) => {
      // Only a message published at QoS 0 comes here (a QoS 1 subscription delivers it at 0).
      if (packet.qos === 0) this.#arrive(packet)
    })
    this.#client.on("error", (error) => {
      if (error !== heldBack) this.#lostBecause ??= error
    })
    this.#client.on("disconnect", (packet) => {
      this.#lostBecause ??= new Error(
        packet.reasonCode === 0x8e
          ? "another connection took the session over (the same client id is in use elsewhere)"
          : `the broker ended the connection (reason code ${packet.reasonCode ?? 0})`,
      )
    })
    this.#client.on("close", () => {
      this.#lostBecause ??= new Error("connection closed")
      for (const wake of this.#wake) wake()
    })
  }

  /** Connects the session of `url` and subscribes its filters; rejects with the broker's refusal or the connection's failure. */
  static async open(url: MqttUrl, receiveMaximum: number, connectTimeoutMs: number): Promise<Session> {
    const session = new Session(url, receiveMaximum, connectTimeoutMs)
    await session.#connected()
    try {
      // A connection lost before the SUBACK would leave MQTT.js's promise unsettled.
      const closed = session.#closed.then(() => {
        throw session.#lostBecause ?? new Error("the connection closed before SUBACK")
      })
      closed.catch(() => {}) // settled later, when the connection ends, by which time no one waits on it
      const grants = await Promise.race([
        // rh 1: retained messages are sent when the subscription is made, not on every resume.
        session.#client.subscribeAsync([...url.topics], { qos: 1, rh: 1 }),
        closed,
      ])
      for (const grant of grants)
        if (grant.qos !== 1)
          throw new SpoolError(
            "usage",
            `${url.describe}: the broker granted topic ${JSON.stringify(grant.topic)} ` +
              (grant.qos === 0
                ? "only at QoS 0, which is never acknowledged (at most once); allow QoS 1 for this client"
                : `no subscription (${refusals[grant.qos] ?? `reason code ${grant.qos}`}); check the filter and the broker's ACL`),
          )
    } catch (error) {
      await session.close()
      throw error
    }
    return session
  }

  get isAlive(): boolean {
    return this.#lostBecause === undefined && !this.#isClosing
  }

  get lostBecause(): unknown {
    return this.#lostBecause
  }

  get waiting(): number {
    return this.#arrived.length
  }

  /** Resolves when something arrived, the connection was lost, a signal aborted, or `ms` passed. */
  waitForArrival(ms: number, ...signals: AbortSignal[]): Promise<"arrived" | "lost" | "aborted" | "timeout"> {
    const now = (): "arrived" | "lost" | "aborted" | undefined =>
      this.#arrived.length > 0
        ? "arrived"
        : !this.isAlive
          ? "lost"
          : signals.some((s) => s.aborted)
            ? "aborted"
            : undefined
    const ready = now()
    if (ready !== undefined) return Promise.resolve(ready)
    if (ms <= 0) return Promise.resolve("timeout")
    return new Promise((resolve) => {
      const done = () => {
        const state = now()
        if (state === undefined) return
        finish(state)
      }
      const finish = (state: "arrived" | "lost" | "aborted" | "timeout") => {
        clearTimeout(timer)
        this.#wake.delete(done)
        for (const s of signals) s.removeEventListener("abort", done)
        resolve(state)
      }
      const timer = setTimeout(() => finish("timeout"), ms)
      this.#wake.add(done)
      for (const s of signals) s.addEventListener("abort", done, { once: true })
    })
  }

  /** Waits while more PUBLISHes of the same burst are still being read, up to `max` waiting. */
  async gather(max: number): Promise<void> {
    let seen = -1
    while (this.isAlive && this.#arrived.length < max && this.#arrived.length !== seen) {
      seen = this.#arrived.length
      await new Promise<void>((resolve) => setImmediate(resolve))
    }
  }

  /** Hands over up to `max` waiting PUBLISHes, oldest first; none is acknowledged yet. */
  take(max: number): IPublishPacket[] {
    return this.#arrived.splice(0, max)
  }

  /**
   * Writes a PUBACK for each packet id, on this connection only, and resolves once the broker has
   * read them. MQTT answers a PUBACK with nothing, so an UNSUBSCRIBE of a filter no one uses
   * follows them: the broker handles a connection's packets in order, and its UNSUBACK says the
   * PUBACKs before it were taken. One lost with the connection makes the broker send the message
   * again, DUP set, to the session's next connection.
   */
  async puback(messageIds: readonly number[]): Promise<void> {
    if (!this.isAlive || !this.#client.connected || messageIds.length === 0) return
    // MQTT.js has no public call that PUBACKs later; its packet writer is the one way to write a
    // packet in turn with the client's own (see the head of this file).
    const send = (this.#client as unknown as Record<string, unknown>)._sendPacket as (
      packet: { cmd: "puback"; messageId: number; reasonCode: number },
      written?: () => void,
    ) => void
    for (const messageId of messageIds) send.call(this.#client, { cmd: "puback", messageId, reasonCode: 0 })
    await Promise.race([this.#client.unsubscribeAsync(barrierFilter).catch(() => {}), this.#closed])
  }

  /**
   * Ends the connection with a DISCONNECT that keeps the session (its expiry is CONNECT's): what
   * was not PUBACKed stays with the broker for the next connection. PUBACKs written before are
   * sent first, in order, on the same socket.
   */
  async close(): Promise<void> {
    this.#isClosing = true
    for (const wake of this.#wake) wake()
    const ended = this.#client.endAsync(!this.#client.connected).catch(() => {})
    // A socket that never answers must not hold the close: after 5 s it is destroyed.
    let timer: Timer | undefined
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), 5000)
    })
    if ((await Promise.race([ended, late])) === "late") this.#client.stream?.destroy()
    clearTimeout(timer)
  }

  #arrive(packet: IPublishPacket): void {
    this.#arrived.push(packet)
    for (const wake of this.#wake) wake()
  }

  #connected(): Promise<void> {
    return new Promise((resolve, reject) => {
      const client = this.#client
      const settle = (error?: unknown) => {
        client.off("connect", onConnect)
        client.off("close", onClose)
        client.off("error", onError)
        if (error === undefined) resolve()
        else {
          client.end(true)
          reject(error)
        }
      }
      const onConnect = () => settle()
      const onError = (error: Error) => settle(error)
      const onClose = () => settle(this.#lostBecause ?? new Error("the connection closed before CONNACK"))
      client.on("connect", onConnect)
      client.on("error", onError)
      client.on("close", onClose)
    })
  }
}
