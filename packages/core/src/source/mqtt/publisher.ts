// The connection replays are published on: a client id of its own with a clean session, so that
// a replay never takes the consumer's session over, connected at first need and kept.
import { connect, type MqttClient } from "mqtt"
import { SpoolError } from "../../errors.ts"
import type { Origin } from "../port.ts"
import { publishOptions } from "./delivery.ts"
import type { MqttUrl } from "./url.ts"

/** Publishes at QoS 1 on a connection that is not the consumer's session. */
export class Publisher {
  readonly #url: MqttUrl
  readonly #connectTimeoutMs: number
  // MQTT.js resolves a publish with the PUBLISH it sent; the PUBACK's reason code is read as it arrives.
  readonly #pubackCodes = new Map<number, number>()
  #client: MqttClient | undefined

  constructor(url: MqttUrl, connectTimeoutMs: number) {
    this.#url = url
    this.#connectTimeoutMs = connectTimeoutMs
  }

  /**
   * Publishes `body` to `origin.address` and resolves with the PUBACK's reason code, or "lost"
   * when the connection went before the PUBACK came (publish again: a replay is recognised by
   * its header). Rejects when the connection cannot be made or the broker refused the message.
   */
  async publish(origin: Origin, body: Uint8Array): Promise<number | "lost"> {
    const client = await this.connected()
    let sent: Awaited<ReturnType<MqttClient["publishAsync"]>> | "lost"
    // With reconnection off, MQTT.js leaves a publish unsettled when its socket closes.
    let onClose = () => {}
    const closed = new Promise<"lost">((resolve) => {
      onClose = () => resolve("lost")
      client.once("close", onClose)
    })
    try {
      sent = await Promise.race([
        client.publishAsync(origin.address, Buffer.from(body), publishOptions(origin)),
        closed,
      ])
    } catch (error) {
      if (!client.connected) return "lost"
      throw new SpoolError("io", `${this.#url.describe}: the broker did not accept the message to ${origin.address}`, {
        cause: error,
      })
    } finally {
      client.off("close", onClose)
    }
    if (sent === "lost") return "lost"
    const id = sent?.messageId
    if (id === undefined) return 0
    const code = this.#pubackCodes.get(id) ?? 0
    this.#pubackCodes.delete(id)
    return code
  }

  /** The live connection, made first when there is none; rejects with the connection's failure. */
  connected(): Promise<MqttClient> {
    const live = this.#client
    if (live?.connected) return Promise.resolve(live)
    live?.end(true)
    this.#client = undefined
    return new Promise((resolve, reject) => {
      const client = connect(this.#url.broker, {
        protocolVersion: 5,
        clientId: `${this.#url.clientId}-replay-${crypto.randomUUID().slice(0, 8)}`,
        clean: true,
        reconnectPeriod: 0,
        connectTimeout: this.#connectTimeoutMs,
        ...(this.#url.username !== undefined ? { username: this.#url.username } : {}),
        ...(this.#url.password !== undefined ? { password: this.#url.password } : {}),
      })
      const fail = (error: unknown) => {
        client.removeAllListeners("connect")
        client.end(true)
        reject(error)
      }
      const onClose = () => fail(new Error("the connection closed before CONNACK"))
      client.once("connect", () => {
        client.removeListener("error", fail)
        client.removeListener("close", onClose)
        client.on("error", () => {}) // a pending publish's promise gets the failure
        client.on("packetreceive", (packet) => {
          if (packet.cmd === "puback" && packet.messageId !== undefined)
            this.#pubackCodes.set(packet.messageId, packet.reasonCode ?? 0)
        })
        this.#client = client
        resolve(client)
      })
      client.once("error", fail)
      client.once("close", onClose)
    })
  }

  /** Ends the connection, if there is one. */
  async close(): Promise<void> {
    const client = this.#client
    this.#client = undefined
    await client?.endAsync().catch(() => {})
  }
}
