// The source contract: what every source adapter must do, written once and run against each
// transport on the machine's server, each case on a queue, stream or topic of its own, removed
// afterwards. A case only some transports can pass names the feature it needs (see Features),
// never the transport. A transport whose server is absent has its cases skipped with the reason
// printed; under CI, which runs every server, they fail instead.
// The cases are in ./contract/, in modules named .test.ts so they stay test code (out of the
// package, its build and the production-import scan) that only this file registers.
import { describe, setDefaultTimeout } from "bun:test"
import { randomUUID } from "node:crypto"
import { requireServer, tempJetStream, tempMqttTopic, tempRedisStream } from "@spool/test-support"
import { connect } from "amqplib"
import { openAmqpSource } from "./amqp/source.ts"
import type { SourceTransport, SourceUnderTest } from "./contract/fixture.test.ts"
import { keepAlive } from "./contract/keep-alive.test.ts"
import { receiving } from "./contract/receiving.test.ts"
import { replay } from "./contract/replay.test.ts"
import { settling } from "./contract/settling.test.ts"
import { openMqttSource } from "./mqtt/source.ts"
import { openJetStreamSource } from "./nats/source.ts"
import type { SourcePort } from "./port.ts"
import { openRedisSource } from "./redis/source.ts"

type Consumer = "first" | "second"

/** A queue whose every source opened is closed, then the queue removed, when it is disposed. */
function underTest(
  open: (consumer: Consumer) => Promise<SourcePort>,
  publish: (body: Uint8Array) => Promise<unknown>,
  remove: () => PromiseLike<unknown>,
): SourceUnderTest {
  const opened: SourcePort[] = []
  return {
    async open(consumer = "first") {
      const source = await open(consumer)
      opened.push(source)
      return source
    },
    async publish(...bodies) {
      for (const body of bodies) await publish(body)
    },
    async [Symbol.asyncDispose]() {
      try {
        await Promise.all(opened.map((source) => source.close()))
      } finally {
        await remove()
      }
    },
  }
}

/** A durable RabbitMQ queue of `type`; each message published with a message-id of its own, as producers that want deduplication do. */
async function amqpQueue(type: "classic" | "quorum"): Promise<SourceUnderTest> {
  const broker = "amqp://guest:guest@127.0.0.1:5672/"
  const connection = await connect(broker)
  const channel = await connection.createConfirmChannel()
  const name = `spool-contract-${type}-${randomUUID()}`
  await channel.assertQueue(name, { durable: true, arguments: { "x-queue-type": type } })
  return underTest(
    () => openAmqpSource(`${broker}?queue=${encodeURIComponent(name)}`),
    async (body) => {
      channel.sendToQueue(name, Buffer.from(body), { persistent: true, messageId: randomUUID() })
      await channel.waitForConfirms()
    },
    async () => {
      await channel.deleteQueue(name)
      await connection.close()
    },
  )
}

const rabbit = await requireServer("RabbitMQ", "127.0.0.1", 5672, "rabbitmq-server -detached")
const rabbitFeatures = { stableId: true, delayedRelease: false, needsKeepAlive: false, hasKeeper: false }
// Windows of two seconds: a delivery left in hand comes back within a case, and one kept alive
// every quarter window stays kept through a stall of a second on a loaded machine (the suite runs
// beside the end-to-end tests on two cores).
const windowMs = 2000

const transports: readonly SourceTransport[] = [
  {
    name: "a RabbitMQ classic queue",
    features: { ...rabbitFeatures, countsDeliveries: false },
    it: rabbit,
    open: () => amqpQueue("classic"),
  },
  {
    name: "a RabbitMQ quorum queue",
    features: { ...rabbitFeatures, countsDeliveries: true },
    it: rabbit,
    open: () => amqpQueue("quorum"),
  },
  {
    name: "a NATS JetStream durable consumer",
    features: { stableId: true, countsDeliveries: true, delayedRelease: true, needsKeepAlive: true, hasKeeper: true },
    it: await requireServer("NATS", "127.0.0.1", 4222, "nats-server -js -a 127.0.0.1 -p 4222"),
    async open() {
      const stream = await tempJetStream(windowMs)
      // Both consumers pull from the one durable consumer, as two spool processes on one stream do.
      return underTest(
        () => openJetStreamSource(stream.url),
        (body) => stream.publish(body),
        () => stream[Symbol.asyncDispose](),
      )
    },
  },
  {
    name: "a Redis Streams consumer group",
    features: { stableId: true, countsDeliveries: true, delayedRelease: true, needsKeepAlive: true, hasKeeper: true },
    it: await requireServer(
      "Redis",
      "127.0.0.1",
      6379,
      'redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no',
    ),
    async open() {
      const stream = await tempRedisStream(windowMs)
      return underTest(
        (consumer) => openRedisSource(`${stream.url}&consumer=${consumer}`),
        (body) => stream.publish(body),
        () => stream[Symbol.asyncDispose](),
      )
    },
  },
  {
    name: "an MQTT 5 persistent session",
    // A release is sent again on the session's next connection, which the source makes no sooner than the delay.
    features: {
      stableId: false,
      countsDeliveries: false,
      delayedRelease: true,
      needsKeepAlive: false,
      hasKeeper: false,
    },
    it: await requireServer("Mosquitto", "127.0.0.1", 1883, "mosquitto -d -c /etc/mosquitto/mosquitto.conf"),
    async open() {
      const topic = await tempMqttTopic()
      return underTest(
        async (consumer) => {
          // One persistent session per topic here: a second consumer would need a session of its own made before the publish.
          if (consumer !== "first") throw new Error("the MQTT fixture has one consumer")
          return openMqttSource(topic.url())
        },
        (body) => topic.publish([body]),
        () => topic[Symbol.asyncDispose](),
      )
    },
  },
]

// Windows, delays and reconnects take seconds; a 2-core machine under load takes more.
setDefaultTimeout(60_000)

const areas = { receiving, settling, replay, keepAlive }

for (const t of transports)
  describe(`the source contract on ${t.name}`, () => {
    for (const [name, cases] of Object.entries(areas)) describe(name, () => cases(t))
  })
