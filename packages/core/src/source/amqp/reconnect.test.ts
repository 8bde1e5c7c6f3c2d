// The AMQP source losing its broker mid-batch: from the broker's side (rabbitmqctl), through a
// TCP proxy that resets the sockets and keeps the broker away for a while, and for good.
import { afterEach, expect } from "bun:test"
import {
  closeConnectionNamed,
  numberedMessages,
  requireServer,
  requireTool,
  tcpProxy,
  tempAmqpQueue,
} from "@spool/test-support"
import { SpoolError } from "../../errors.ts"
import type { Log } from "../../log.ts"
import type { Delivery, SourcePort } from "../port.ts"
import { type AmqpSourceOptions, openAmqpSource } from "./source.ts"

const it = await requireServer("RabbitMQ", "127.0.0.1", 5672, "rabbitmq-server -detached")
const itWithCtl = Bun.which("rabbitmqctl") === null ? requireTool("rabbitmqctl", "apt-get install rabbitmq-server") : it

/** Reads until `done` holds or 10 s pass, and returns the last value read. */
async function until<T>(read: () => T | Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 10_000
  for (;;) {
    const value = await read()
    if (done(value) || Date.now() > deadline) return value
    await Bun.sleep(10)
  }
}

const ids = (deliveries: readonly Delivery[]) => deliveries.map((d) => d.id)
const allIds = (count: number) => numberedMessages(count).map((m) => m.id)

const opened: SourcePort[] = []
async function open(url: string, options?: AmqpSourceOptions): Promise<SourcePort> {
  const source = await openAmqpSource(url, options)
  opened.push(source)
  return source
}
afterEach(async () => {
  await Promise.all(opened.splice(0).map((source) => source.close()))
})

/** A log that keeps each event's name, to count losses, retries and connections. */
function eventLog(): Log & { readonly events: string[]; count(event: string): number } {
  const events: string[] = []
  const keep = (event: string) => void events.push(event)
  return {
    events,
    warn: keep,
    notice: keep,
    info: keep,
    debug: keep,
    count: (e) => events.filter((x) => x === e).length,
  }
}

/** Receives (and acks, unless told not to) batches until `count` came or a receive comes back empty. */
async function drain(source: SourcePort, count: number, max: number, waitMs: number, isAcked = true) {
  const seen: Delivery[] = []
  while (seen.length < count) {
    const batch = await source.receive(max, waitMs)
    if (batch.length === 0) break
    seen.push(...batch)
    if (isAcked) await source.ack(batch)
  }
  return seen
}

itWithCtl(
  "survives the broker closing its connection mid-batch: nothing lost, none acked twice",
  async () => {
    await using q = await tempAmqpQueue()
    await q.publish(...numberedMessages(20))
    const log = eventLog()
    const name = `spool-test-${crypto.randomUUID()}`
    const source = await open(q.url, { connectionName: name, log })
    const batch = await drain(source, 5, 5, 5000, false)
    expect(ids(batch)).toEqual(["m-00", "m-01", "m-02", "m-03", "m-04"])
    await source.ack(batch.slice(0, 2))
    await closeConnectionNamed(name)
    // These three came on the closed channel: their ack is a no-op, not an error and not an ack
    // of whatever the new channel numbers the same.
    await source.ack(batch.slice(2))
    const after = await drain(source, 18, 5, 5000)
    expect(ids(after).toSorted()).toEqual(allIds(20).slice(2))
    // Redelivered: the three in hand at the cut, and the two the broker pushed after the two acks
    // (the prefetch is 5), which waited in memory for the next receive.
    expect(after.filter((d) => d.redelivered).map((d) => d.id)).toEqual(["m-02", "m-03", "m-04", "m-05", "m-06"])
    expect(await source.receive(5, 200)).toEqual([])
    await source.close()
    expect(await q.ready()).toBe(0)
    // One loss, one reconnection: an ack with a stale tag would have closed the new channel too.
    expect(log.count("source-lost")).toBe(1)
    expect(log.count("source-connected")).toBe(2)
  },
  30_000,
)

it("survives a network cut and a broker out of reach for longer than the receive's wait", async () => {
  await using q = await tempAmqpQueue("quorum")
  await q.publish(...numberedMessages(10))
  await using proxy = await tcpProxy(5672)
  const log = eventLog()
  const url = q.url.replace(":5672/", `:${proxy.port}/`)
  const source = await open(url, { log, reconnect: { initialDelayMs: 50, maxDelayMs: 200 } })
  const before = await drain(source, 4, 4, 5000, false)
  expect(ids(before)).toEqual(["m-00", "m-01", "m-02", "m-03"])
  proxy.cut(800)
  await source.ack(before)
  const started = performance.now()
  // The wait is 100 ms, the outage 800: the receive must not mistake the outage for an empty
  // queue (a drain would end on that), so it returns deliveries.
  const first = await source.receive(10, 100)
  expect(performance.now() - started).toBeGreaterThanOrEqual(700)
  expect(first.length).toBeGreaterThan(0)
  await source.ack(first)
  const rest = await drain(source, 10 - first.length, 10, 2000)
  const after = [...first, ...rest]
  expect(ids(after).toSorted()).toEqual(allIds(10))
  // The four acked on the cut connection were never acked: they come again, redelivered.
  expect(after.filter((d) => ["m-00", "m-01", "m-02", "m-03"].includes(d.id)).every((d) => d.redelivered)).toBe(true)
  expect(log.count("source-retry")).toBeGreaterThan(0)
  await source.close()
  expect(await q.ready()).toBe(0)
}, 30_000)

it("waits the whole waitMs again once it is back, before it calls the queue empty", async () => {
  await using q = await tempAmqpQueue()
  await using proxy = await tcpProxy(5672)
  const url = q.url.replace(":5672/", `:${proxy.port}/`)
  const source = await open(url, { reconnect: { initialDelayMs: 50, maxDelayMs: 100 } })
  expect(await source.receive(1, 100)).toEqual([])
  const started = performance.now()
  proxy.cut(500)
  const receiving = source.receive(1, 1000)
  expect(
    await until(
      () => proxy.forwarded,
      (n) => n === 2,
    ),
  ).toBe(2)
  // Published after a wait counted from the call would have ended, but within one counted
  // from the new subscription.
  await Bun.sleep(Math.max(0, started + 1100 - performance.now()))
  await q.publish({ body: "late", id: "m-late" })
  expect(ids(await receiving)).toEqual(["m-late"])
}, 30_000)

it("fails the receive once the broker stays out of reach longer than the policy allows", async () => {
  await using q = await tempAmqpQueue()
  await q.publish(...numberedMessages(1))
  await using proxy = await tcpProxy(5672)
  const url = q.url.replace(":5672/", `:${proxy.port}/`)
  const source = await open(url, { reconnect: { initialDelayMs: 20, maxDelayMs: 50, giveUpAfterMs: 400 } })
  await source.ack(await source.receive(1, 5000))
  proxy.cut(Number.POSITIVE_INFINITY)
  const started = performance.now()
  const failure = await source.receive(1, 60_000).then(
    () => undefined,
    (error: unknown) => error,
  )
  expect(failure).toBeInstanceOf(SpoolError)
  expect((failure as SpoolError).code).toBe("io")
  expect((failure as SpoolError).message).toContain("could not be reached")
  expect(performance.now() - started).toBeLessThan(10_000)
}, 30_000)

it("publishes after the connection it was using was cut", async () => {
  await using q = await tempAmqpQueue()
  await using proxy = await tcpProxy(5672)
  const url = q.url.replace(":5672/", `:${proxy.port}/`)
  const source = await open(url, { reconnect: { initialDelayMs: 20, maxDelayMs: 50 } })
  const origin = { source: source.describe, address: q.name }
  await source.publish(origin, new TextEncoder().encode("one"))
  proxy.cut()
  // The cut may or may not be noticed before this publish: either it reconnects first, or its
  // confirm fails and says so. A second publish is always through.
  await source.publish(origin, new TextEncoder().encode("two")).catch((error: unknown) => {
    expect(error).toBeInstanceOf(SpoolError)
  })
  await source.publish(origin, new TextEncoder().encode("three"))
  expect(await q.ready()).toBeGreaterThanOrEqual(2)
  expect(proxy.forwarded).toBe(2)
}, 30_000)
