// The library consuming a broker (createConsumer and createPostgresConsumer with a `source`),
// against the machine's RabbitMQ, NATS JetStream, Redis and Mosquitto, each test on a queue, stream or topic of its own:
// a handler's effect is applied once per msg_id whatever the broker delivers, and a handler that
// fails transiently is deferred through deferred/ and applied once later, its delivery acked.

import type { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { type ConsumeSummary, createConsumer, createPostgresConsumer, TransientError } from "@spool/core"
import {
  pgUnavailable,
  requireServer,
  tempAmqpQueue,
  tempDatabase,
  tempJetStream,
  tempMqttTopic,
  tempQueue,
  tempRedisStream,
} from "@spool/test-support"
import type { SQL } from "bun"

const rabbit = await requireServer("RabbitMQ", "127.0.0.1", 5672, "rabbitmq-server")
const nats = await requireServer("NATS", "127.0.0.1", 4222, "nats-server -js -a 127.0.0.1 -p 4222")
const mosquitto = await requireServer("Mosquitto", "127.0.0.1", 1883, "mosquitto -d -c /etc/mosquitto/mosquitto.conf")
const redis = await requireServer("Redis", "127.0.0.1", 6379, "redis-server --daemonize yes --save ''")
const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)
const pg = pgSkip ? it.skip : it

/** A queue or stream of one test. */
interface Broker extends AsyncDisposable {
  readonly url: string
  publish(bodies: readonly string[]): Promise<void>
  /** Messages not yet acknowledged. */
  unacked(): Promise<number>
}

const brokers = [
  {
    name: "RabbitMQ",
    it: rabbit,
    async open(): Promise<Broker> {
      const q = await tempAmqpQueue()
      let n = 0
      return {
        url: q.url,
        // Each publish is a message of its own (its own message-id), the same body or not.
        publish: (bodies) => q.publish(...bodies.map((body) => ({ body, id: `p-${n++}` }))),
        unacked: () => q.ready(),
        [Symbol.asyncDispose]: () => q[Symbol.asyncDispose](),
      }
    },
  },
  {
    name: "NATS JetStream",
    it: nats,
    async open(): Promise<Broker> {
      const s = await tempJetStream(2000)
      return {
        url: s.url,
        publish: (bodies) => s.publish(...bodies),
        unacked: () => s.unacked(),
        [Symbol.asyncDispose]: () => s[Symbol.asyncDispose](),
      }
    },
  },
  {
    name: "Redis Streams",
    it: redis,
    async open(): Promise<Broker> {
      const s = await tempRedisStream(2000)
      return {
        url: s.url,
        publish: async (bodies) => void (await s.publish(...bodies)),
        unacked: () => s.unacked(),
        [Symbol.asyncDispose]: () => s[Symbol.asyncDispose](),
      }
    },
  },
  {
    name: "MQTT",
    it: mosquitto,
    async open(): Promise<Broker> {
      const t = await tempMqttTopic()
      return {
        url: t.url(),
        // The same bytes published again are a new delivery (no DUP): the ledger counts a duplicate.
        publish: (bodies) => t.publish(bodies),
        unacked: () => t.unacked(),
        [Symbol.asyncDispose]: () => t[Symbol.asyncDispose](),
      }
    },
  },
] as const

const body = (i: number) =>
  JSON.stringify({ msg_id: `m-${String(i).padStart(2, "0")}`, order_no: "O-1", seq: i + 1, amount: i + 1 })

/** The handler under test: counts its applications per msg_id, and fails as `fail` says. */
type Fail = (msgId: string) => void

/** A consumer on one ledger, with the effect table it writes and the way to read it. */
interface LibraryConsumer extends AsyncDisposable {
  readonly root: string
  drain(): Promise<ConsumeSummary>
  watch(signal: AbortSignal): Promise<ConsumeSummary>
  /** How many times the effect of each msg_id was committed. */
  applied(): Promise<Record<string, number>>
}

// The first delay counts from the start of the commit that deferred the message, so it outlasts a
// slow first commit (PostgreSQL's first transaction on a new connection), or the first drain
// would already try the message again.
const defer = { firstMs: 1000, maxMs: 1000 }

const ledgers = [
  {
    name: "SQLite",
    it,
    async open(url: string, fail: Fail): Promise<LibraryConsumer> {
      const q = await tempQueue()
      const consumer = createConsumer({
        root: q.root,
        source: url,
        batchSize: 8,
        idleWaitMs: 500,
        defer,
        setup: (db: Database) =>
          db.run("CREATE TABLE IF NOT EXISTS applied (msg_id TEXT PRIMARY KEY, n INTEGER NOT NULL)"),
        handle: (m, db) => {
          fail(m.msg_id)
          db.run("INSERT INTO applied VALUES (?, 1) ON CONFLICT (msg_id) DO UPDATE SET n = n + 1", [m.msg_id])
        },
      })
      return {
        root: q.root,
        drain: () => consumer.drain(),
        watch: (signal) => consumer.watch(signal),
        applied: async () =>
          Object.fromEntries(
            consumer.ledger.db
              .query<{ msg_id: string; n: number }, []>("SELECT msg_id, n FROM applied")
              .all()
              .map((r) => [r.msg_id, r.n]),
          ),
        async [Symbol.asyncDispose]() {
          await consumer[Symbol.asyncDispose]()
          await q[Symbol.asyncDispose]()
        },
      }
    },
  },
  {
    name: "PostgreSQL",
    it: pg,
    async open(url: string, fail: Fail): Promise<LibraryConsumer> {
      const q = await tempQueue()
      const db = await tempDatabase()
      const consumer = await createPostgresConsumer({
        root: q.root,
        ledger: db.url,
        source: url,
        batchSize: 8,
        idleWaitMs: 500,
        defer,
        setup: (sql: SQL) => sql`CREATE TABLE IF NOT EXISTS applied (msg_id TEXT PRIMARY KEY, n INTEGER NOT NULL)`,
        handle: async (m, tx) => {
          fail(m.msg_id)
          await tx`INSERT INTO applied VALUES (${m.msg_id}, 1) ON CONFLICT (msg_id) DO UPDATE SET n = applied.n + 1`
        },
      })
      return {
        root: q.root,
        drain: () => consumer.drain(),
        watch: (signal) => consumer.watch(signal),
        applied: async () => {
          const rows: { msg_id: string; n: number }[] = await consumer.ledger.sql`SELECT msg_id, n FROM applied`
          return Object.fromEntries(rows.map((r) => [r.msg_id, Number(r.n)]))
        },
        async [Symbol.asyncDispose]() {
          await consumer.close()
          await db[Symbol.asyncDispose]()
          await q[Symbol.asyncDispose]()
        },
      }
    },
  },
] as const

const filesIn = (root: string, dir: string) => fs.readdirSync(`${root}/${dir}`).length
const once = (ids: readonly string[]) => Object.fromEntries(ids.map((id) => [id, 1]))
const ids = (n: number) => Array.from({ length: n }, (_, i) => JSON.parse(body(i)).msg_id as string)

for (const b of brokers)
  for (const l of ledgers)
    describe(`the library with source: ${b.name}, ${l.name} ledger`, () => {
      const both = b.it === it ? l.it : b.it

      both(
        "applies each msg_id's effect once, with every message published twice, and leaves nothing unacked",
        async () => {
          await using broker = await b.open()
          const bodies = Array.from({ length: 20 }, (_, i) => body(i))
          await broker.publish([...bodies, ...bodies.slice(0, 10), ...bodies.slice(5)])
          await using c = await l.open(broker.url, () => {})
          const s = await c.drain()
          expect(s).toMatchObject({ processed: 20, duplicates: 25, rejected: 0 })
          expect(await c.applied()).toEqual(once(ids(20)))
          expect(filesIn(c.root, "done")).toBe(45)
          expect(filesIn(c.root, "processing")).toBe(0)
          expect(await broker.unacked()).toBe(0)
          // What it said then, it says again: a later drain finds nothing more.
          expect(await c.drain()).toMatchObject({ claimed: 0, processed: 0 })
        },
        60_000,
      )

      both(
        "defers a handler failing transiently through deferred/, acks the delivery, and applies it once later",
        async () => {
          await using broker = await b.open()
          await broker.publish(Array.from({ length: 12 }, (_, i) => body(i)))
          const tries = new Map<string, number>()
          const flaky = new Set(["m-03", "m-07"])
          await using c = await l.open(broker.url, (msgId) => {
            const n = (tries.get(msgId) ?? 0) + 1
            tries.set(msgId, n)
            if (flaky.has(msgId) && n <= 2) throw new TransientError(`the rates service is down (try ${n})`)
          })
          const first = await c.drain()
          // Each flaky message is deferred at least once; a drain slower than the delay (a loaded
          // machine) retries it within the same drain, which defers it again or applies it.
          expect(first.processed).toBeGreaterThanOrEqual(10)
          expect(first.deferred).toBeGreaterThanOrEqual(2)
          expect(first.processed + first.deferred).toBeLessThanOrEqual(14)
          // The deliveries are acknowledged: the files in deferred/ are the messages' home now.
          expect(await broker.unacked()).toBe(0)
          const applied = await c.applied()
          for (const id of ids(12).filter((id) => !flaky.has(id))) expect(applied[id]).toBe(1)
          for (let i = 0; i < 40 && filesIn(c.root, "deferred") > 0; i++) {
            await Bun.sleep(150)
            await c.drain()
          }
          expect(filesIn(c.root, "deferred")).toBe(0)
          expect(await c.applied()).toEqual(once(ids(12)))
          for (const id of flaky) expect(tries.get(id)).toBe(3)
          expect(filesIn(c.root, "done")).toBe(12)
          expect(filesIn(c.root, "error")).toBe(0)
          expect(await broker.unacked()).toBe(0)
        },
        60_000,
      )

      both(
        "watches until stopped: takes what is published meanwhile, then finishes with nothing in hand",
        async () => {
          await using broker = await b.open()
          await using c = await l.open(broker.url, () => {})
          const stop = new AbortController()
          const watching = c.watch(stop.signal)
          await broker.publish(Array.from({ length: 5 }, (_, i) => body(i)))
          await Bun.sleep(700)
          await broker.publish(Array.from({ length: 5 }, (_, i) => body(i + 5)))
          for (let i = 0; i < 100 && Object.keys(await c.applied()).length < 10; i++) await Bun.sleep(100)
          stop.abort()
          expect(await watching).toMatchObject({ processed: 10 })
          expect(await c.applied()).toEqual(once(ids(10)))
          expect(filesIn(c.root, "processing")).toBe(0)
          expect(await broker.unacked()).toBe(0)
        },
        60_000,
      )
    })

describe("the library with source: Redis Streams, an effect that fails", () => {
  const redisAndPg = pgSkip ? it.skip : redis

  redisAndPg(
    "keeps the entry pending while its effect runs and fails, and acks it only once the failure is committed",
    async () => {
      await using stream = await tempRedisStream(2000)
      await stream.publish(body(0), body(1))
      await using q = await tempQueue()
      await using db = await tempDatabase()
      const pendingDuring: [string, number][] = []
      const consumer = await createPostgresConsumer({
        root: q.root,
        ledger: db.url,
        source: stream.url,
        batchSize: 8,
        idleWaitMs: 500,
        handle: async (m) => {
          pendingDuring.push([m.msg_id, (await stream.pending()).length])
          if (m.msg_id === "m-01") throw new Error("the ledger of record refused it")
        },
      })
      try {
        expect(await consumer.drain()).toMatchObject({ processed: 1, rejected: 1 })
      } finally {
        await consumer.close()
      }
      expect(pendingDuring).toEqual([
        ["m-00", 2],
        ["m-01", 2],
      ])
      expect(filesIn(q.root, "error")).toBe(1)
      expect(await stream.pending()).toEqual([])
      expect(await stream.unacked()).toBe(0)
    },
    60_000,
  )
})
