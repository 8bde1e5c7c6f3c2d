// The broker contenders of the bench (bench/contenders.ts runs them): consume --source from
// RabbitMQ, from JetStream, from a Redis stream and from MQTT, each beside a raw client loop that
// only receives and acks (the transport's floor), on the bench's generated messages published, in
// name order, to a fresh queue, stream or session for every run. MQTT runs on a private Mosquitto that queues
// without limit (the machine's keeps 1000 messages per session).
import fs from "node:fs"
import { join } from "node:path"
import { tempAmqpQueue, tempJetStream, tempMosquitto, tempMqttTopic, tempRedisStream } from "@spool/test-support"

export const brokerContenders = [
  "consume-amqp",
  "amqp-raw",
  "consume-nats",
  "nats-raw",
  "consume-redis",
  "redis-raw",
  "consume-mqtt",
  "mqtt-raw",
] as const
export type BrokerContender = (typeof brokerContenders)[number]

export const isBrokerContender = (c: string): c is BrokerContender =>
  (brokerContenders as readonly string[]).includes(c)

/** A queue or stream of one run, deleted when disposed. */
export interface BenchBroker extends AsyncDisposable {
  readonly url: string
  /** Messages not acknowledged yet: 0 after a run that took them all. */
  unacked(): Promise<number>
}

/** A fresh queue (amqp), stream (nats, redis) or session (mqtt) holding every file of `master`, in name order. */
export async function brokerWith(contender: BrokerContender, master: string): Promise<BenchBroker> {
  const files = fs.readdirSync(master).sort()
  const chunks = Array.from({ length: Math.ceil(files.length / 1000) }, (_, i) =>
    files.slice(i * 1000, i * 1000 + 1000),
  )
  const read = (f: string) => fs.readFileSync(join(master, f))
  if (contender.includes("amqp")) {
    const q = await tempAmqpQueue()
    let n = 0
    for (const chunk of chunks)
      await q.publish(...chunk.map((f) => ({ body: read(f).toString("utf8"), id: `b-${n++}` })))
    return { url: q.url, unacked: () => q.ready(), [Symbol.asyncDispose]: () => q[Symbol.asyncDispose]() }
  }
  if (contender.includes("mqtt")) {
    const broker = await tempMosquitto()
    const t = await tempMqttTopic(broker.url)
    for (const chunk of chunks) await t.publish(chunk.map(read))
    return {
      url: t.url(),
      unacked: () => t.unacked(),
      async [Symbol.asyncDispose]() {
        await t[Symbol.asyncDispose]()
        await broker[Symbol.asyncDispose]()
      },
    }
  }
  if (contender.includes("redis")) {
    const r = await tempRedisStream(30_000)
    for (const chunk of chunks) await r.publish(...chunk.map((f) => new Uint8Array(read(f))))
    return { url: r.url, unacked: () => r.unacked(), [Symbol.asyncDispose]: () => r[Symbol.asyncDispose]() }
  }
  const s = await tempJetStream(30_000)
  for (const chunk of chunks) await s.publish(...chunk.map((f) => new Uint8Array(read(f))))
  return { url: s.url, unacked: () => s.unacked(), [Symbol.asyncDispose]: () => s[Symbol.asyncDispose]() }
}

/** The process a broker contender times: consume --source into `root`, or the raw loop. */
export function brokerCommand(contender: BrokerContender, url: string, root: string, stats: string): string[] {
  if (contender.startsWith("consume-"))
    return [
      "bun",
      "packages/consumer/bin/consume.ts",
      "--root",
      root,
      "--source",
      url,
      "--quiet",
      "--stats-json",
      stats,
    ]
  return ["bun", "bench/broker-raw.ts", url]
}
