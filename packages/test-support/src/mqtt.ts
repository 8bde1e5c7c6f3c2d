// Test support for MQTT sources: a topic prefix and a client id of the test's own on the
// machine's Mosquitto, the consumer's persistent session made before anything is published (a
// session takes in only what is published after it subscribed), what that session still holds,
// and every session the test named cleared when it is disposed.
import { randomUUID } from "node:crypto"
import fs from "node:fs"
import net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connectAsync, type IClientOptions, type IPublishPacket } from "mqtt"

/** The machine's broker, as tests reach it (anonymous). */
export const mqttBroker = "mqtt://127.0.0.1:1883"

/** A topic tree and client ids for one test; their sessions are removed when disposed. */
export interface TempMqttTopic extends AsyncDisposable {
  /** The prefix every topic of the test starts with. */
  readonly prefix: string
  /** The topic `publish` writes to: `PREFIX/orders`. */
  readonly topic: string
  /** The consumer's client id. */
  readonly clientId: string
  /** The source URL: the filter `PREFIX/#`, the client id, and `extra` query parameters. */
  url(extra?: string): string
  /** Publishes each body at QoS 1 to `topic` (or `to`) and resolves once the broker PUBACKed them all. */
  publish(bodies: readonly (string | Uint8Array)[], to?: string, userProperties?: Record<string, string>): Promise<void>
  /**
   * Connects as the consumer, takes nothing (no PUBACK), and counts what the session sends within
   * `waitMs`: the messages it still holds unacknowledged (up to the Receive Maximum of 1000).
   */
  unacked(waitMs?: number): Promise<number>
  /** What `unacked` saw last, oldest first. */
  readonly seen: readonly IPublishPacket[]
  /** Makes the persistent session of another client id (subscribed to `PREFIX/#`), cleared with the rest. */
  session(clientId: string): Promise<void>
}

const heldBack = new Error("held")

/** A topic tree and session of one test on the broker at `broker` (default the machine's). */
export async function tempMqttTopic(broker: string = mqttBroker): Promise<TempMqttTopic> {
  const tag = randomUUID().slice(0, 8)
  const prefix = `spool-test-${tag}`
  const clientId = `spool-test-${tag}`
  const sessions = new Set<string>()
  const seen: IPublishPacket[] = []
  let isDisposed = false
  const resume = (id: string, extra: Partial<IClientOptions> = {}) =>
    connectAsync(
      broker,
      {
        protocolVersion: 5,
        clientId: id,
        clean: false,
        reconnectPeriod: 0,
        properties: { sessionExpiryInterval: 3600, receiveMaximum: 1000 },
        ...extra,
      },
      false,
    )
  const session = async (id: string) => {
    sessions.add(id)
    const client = await resume(id)
    await client.subscribeAsync(`${prefix}/#`, { qos: 1 })
    await client.endAsync()
  }
  await session(clientId)
  const publisher = await connectAsync(
    broker,
    { protocolVersion: 5, clientId: `${clientId}-pub`, reconnectPeriod: 0 },
    false,
  )
  return {
    prefix,
    topic: `${prefix}/orders`,
    clientId,
    url: (extra = "") => `${broker}/?topic=${prefix}/%23&client=${clientId}${extra === "" ? "" : `&${extra}`}`,
    async publish(bodies, to = `${prefix}/orders`, userProperties) {
      await Promise.all(
        bodies.map((b) =>
          publisher.publishAsync(to, Buffer.from(b), {
            qos: 1,
            ...(userProperties !== undefined ? { properties: { userProperties } } : {}),
          }),
        ),
      )
    },
    seen,
    async unacked(waitMs = 1000) {
      seen.length = 0
      const client = await resume(clientId, {
        customHandleAcks: (_topic, _message, packet: IPublishPacket, done) => {
          seen.push(packet)
          done(heldBack)
        },
      })
      client.on("error", () => {})
      await Bun.sleep(waitMs)
      await client.endAsync()
      return seen.length
    },
    session,
    async [Symbol.asyncDispose]() {
      if (isDisposed) return
      isDisposed = true
      await publisher.endAsync()
      // A clean start with no expiry ends each session, with whatever it held, at the DISCONNECT.
      for (const id of sessions) {
        const client = await resume(id, { clean: true, properties: { sessionExpiryInterval: 0 } })
        await client.endAsync()
      }
    },
  }
}

/** A Mosquitto of its own, stopped when disposed. */
export interface TempMosquitto extends AsyncDisposable {
  /** `mqtt://127.0.0.1:PORT`. */
  readonly url: string
}

/**
 * Starts a private Mosquitto on a free port that queues without limit per session (the machine's
 * keeps 1000, its default), for a bench that publishes its whole backlog before consuming it.
 */
export async function tempMosquitto(): Promise<TempMosquitto> {
  const port = await freePort()
  const dir = fs.mkdtempSync(join(tmpdir(), "spool-mosquitto-"))
  const conf = join(dir, "mosquitto.conf")
  fs.writeFileSync(
    conf,
    [`listener ${port} 127.0.0.1`, "allow_anonymous true", "max_queued_messages 0", "persistence false", ""].join("\n"),
  )
  const proc = Bun.spawn(["mosquitto", "-c", conf], { stdout: "ignore", stderr: "ignore" })
  for (let i = 0; i < 100 && !(await answers(port)); i++) await Bun.sleep(50)
  return {
    url: `mqtt://127.0.0.1:${port}`,
    async [Symbol.asyncDispose]() {
      proc.kill()
      await proc.exited
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject()))
    })
  })
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port })
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
  })
}
