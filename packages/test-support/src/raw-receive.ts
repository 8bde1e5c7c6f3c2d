// The transport's own floor for the bench: a plain client loop that receives each message of a
// RabbitMQ queue, a JetStream durable consumer, a Redis stream's group or an MQTT session and
// acknowledges it, with nothing in between (no ledger, no files), until the broker has had nothing
// for `idleMs`, as a drain ends.
import { jetstream } from "@nats-io/jetstream"
import { connect as connectNats } from "@nats-io/transport-node"
import { connect as connectAmqp } from "amqplib"
import Redis from "ioredis"
import { connect as connectMqtt } from "mqtt"

/** Receives and acks until idle; resolves with how many messages it acknowledged. */
export async function receiveAndAck(url: string, idleMs: number, batchSize: number): Promise<number> {
  const u = new URL(url)
  if (u.protocol === "mqtt:") return mqttLoop(u, idleMs, batchSize)
  if (u.protocol === "redis:") return redisLoop(u, idleMs, batchSize)
  return u.protocol === "nats:" ? natsLoop(u, idleMs, batchSize) : amqpLoop(u, idleMs, batchSize)
}

async function amqpLoop(u: URL, idleMs: number, batchSize: number): Promise<number> {
  const queue = u.searchParams.get("queue")
  if (queue === null) throw new Error(`${u.href}: no ?queue=`)
  u.search = ""
  const connection = await connectAmqp(u.href)
  const channel = await connection.createChannel()
  await channel.prefetch(batchSize)
  let acked = 0
  const idle = Promise.withResolvers<void>()
  let timer = setTimeout(idle.resolve, idleMs)
  await channel.consume(queue, (m) => {
    if (m === null) return
    channel.ack(m)
    acked++
    clearTimeout(timer)
    timer = setTimeout(idle.resolve, idleMs)
  })
  await idle.promise
  await channel.close()
  await connection.close()
  return acked
}

async function natsLoop(u: URL, idleMs: number, batchSize: number): Promise<number> {
  const stream = u.searchParams.get("stream")
  const name = u.searchParams.get("consumer")
  if (stream === null || name === null) throw new Error(`${u.href}: no ?stream= and &consumer=`)
  const nc = await connectNats({ servers: u.host })
  const consumer = await jetstream(nc).consumers.get(stream, name)
  let acked = 0
  for (;;) {
    const batch = await consumer.fetch({ max_messages: batchSize, expires: Math.max(1000, idleMs) })
    let received = 0
    for await (const m of batch) {
      m.ack()
      received++
    }
    acked += received
    if (received === 0) break
  }
  await nc.flush()
  await nc.close()
  return acked
}

// MQTT.js PUBACKs each QoS 1 message as it is handled; Receive Maximum bounds what is in flight
// to a batch, as the source's.
async function mqttLoop(u: URL, idleMs: number, batchSize: number): Promise<number> {
  const topics = u.searchParams.getAll("topic")
  const clientId = u.searchParams.get("client")
  if (topics.length === 0 || clientId === null) throw new Error(`${u.href}: no ?topic= and &client=`)
  // The listener is in place before CONNACK: a resumed session sends right behind it.
  const client = connectMqtt(`mqtt://${u.host}`, {
    protocolVersion: 5,
    clientId,
    clean: false,
    reconnectPeriod: 0,
    properties: { sessionExpiryInterval: 3600, receiveMaximum: batchSize },
  })
  let acked = 0
  const idle = Promise.withResolvers<void>()
  let timer = setTimeout(idle.resolve, idleMs)
  client.on("message", () => {
    acked++
    clearTimeout(timer)
    timer = setTimeout(idle.resolve, idleMs)
  })
  await new Promise<void>((resolve, reject) => {
    client.once("connect", () => resolve())
    client.once("error", reject)
  })
  await client.subscribeAsync(topics, { qos: 1 })
  await idle.promise
  await client.endAsync()
  return acked
}

async function redisLoop(u: URL, idleMs: number, batchSize: number): Promise<number> {
  const stream = u.searchParams.get("stream")
  const group = u.searchParams.get("group")
  if (stream === null || group === null) throw new Error(`${u.href}: no ?stream= and &group=`)
  const client = new Redis({ host: u.hostname, port: Number(u.port || 6379), protocol: 2 })
  let acked = 0
  for (;;) {
    const reply = (await client.call(
      ...["XREADGROUP", "GROUP", group, "raw", "COUNT", String(batchSize), "BLOCK", String(idleMs)],
      ...["STREAMS", stream, ">"],
    )) as [string, [string, string[]][]][] | null
    const ids = (reply?.[0]?.[1] ?? []).map(([id]) => id)
    if (ids.length === 0) break
    await client.call("XACK", stream, group, ...ids)
    acked += ids.length
  }
  await client.quit()
  return acked
}
