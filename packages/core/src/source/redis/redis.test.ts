// The Redis Streams source against the machine's Redis, in what is its own: consumer names,
// leases and takeover, entry fields, refusals, cut connections. What every source does is in
// ../contract.test.ts. Each test on a stream and group of its own, deleted afterwards.
import { afterEach, describe, expect } from "bun:test"
import { requireServer, tcpProxy, tempDir, tempRedisStream } from "@spool/test-support"
import { SpoolError } from "../../errors.ts"
import type { Log } from "../../log.ts"
import { type Delivery, replayHeader } from "../port.ts"
import { consumerName, openRedisSource, type RedisSource, type RedisSourceOptions } from "./source.ts"

const it = await requireServer(
  "Redis",
  "127.0.0.1",
  6379,
  'redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no',
)
// Leases and reconnects take seconds; a 2-core machine under load takes more.
const slow = 60_000
const text = (d: Delivery) => new TextDecoder().decode(d.body)

const opened: RedisSource[] = []
async function open(url: string, options: RedisSourceOptions = {}): Promise<RedisSource> {
  const source = await openRedisSource(url, options)
  opened.push(source)
  return source
}
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()))
})

/** The URL with a consumer name of its own: two sources of one test are two consumers. */
const as = (url: string, consumer: string) => `${url}&consumer=${consumer}`

/** Receives until `count` deliveries came or `ms` passed. */
async function receiveAll(source: RedisSource, count: number, ms = 10_000): Promise<Delivery[]> {
  const got: Delivery[] = []
  const end = Date.now() + ms
  while (got.length < count && Date.now() < end) got.push(...(await source.receive(count - got.length, 500)))
  return got
}

describe("Redis Streams source", () => {
  it(
    "receives at most max, new entries with count 1, and an ack leaves nothing pending",
    async () => {
      await using s = await tempRedisStream()
      await s.publish(...Array.from({ length: 10 }, (_, i) => `m${i}`))
      const source = await open(s.url)
      // The lease is the window the engine keeps a batch within.
      expect(source.keepAliveWithinMs).toBe(1000)
      const batch = await source.receive(4, 2000)
      expect(batch.map(text)).toEqual(["m0", "m1", "m2", "m3"])
      const ids = (await s.pending()).map((p) => p.id)
      expect(batch.map((d) => d.id)).toEqual(ids)
      expect(batch.every((d) => d.stableId && d.deliveryCount === 1 && !d.redelivered)).toBe(true)
      expect(batch[0]?.origin).toEqual({ source: s.url.replace(/&lease=\d+$/, ""), address: s.stream })
      expect(await s.unacked()).toBe(10)
      const started = Date.now()
      // Far from waitMs: a receive that waited it out for a full batch would take a minute.
      const rest = await source.receive(100, 60_000)
      expect(rest.map(text)).toEqual(["m4", "m5", "m6", "m7", "m8", "m9"])
      expect(Date.now() - started).toBeLessThan(30_000)
      await source.ack([...batch, ...rest])
      expect(await s.pending()).toEqual([])
      expect(await s.unacked()).toBe(0)
    },
    slow,
  )

  it(
    "frees the reader's connection when a wait is aborted: what comes next is received",
    async () => {
      await using s = await tempRedisStream()
      const source = await open(s.url)
      const abort = new AbortController()
      setTimeout(() => abort.abort(), 200)
      expect(await source.receive(5, 30_000, abort.signal)).toEqual([])
      await s.publish("after")
      expect((await source.receive(5, 2000)).map(text)).toEqual(["after"])
    },
    slow,
  )

  it(
    "started again on the same root, takes its own pending entries first, counted again, then new ones",
    async () => {
      await using s = await tempRedisStream(60_000)
      await using root = await tempDir()
      await s.publish("a", "b", "c")
      const first = await open(s.url, { root: root.path })
      expect(first.holder.consumer).toBe(consumerName(root.path))
      expect((await first.receive(2, 2000)).map(text)).toEqual(["a", "b"])
      await first.close()
      await s.publish("d")
      const again = await open(s.url, { root: root.path })
      // Its pending entries come first, the batch filled up with new ones.
      const batch = await again.receive(10, 2000)
      expect(batch.map((d) => [text(d), d.deliveryCount, d.redelivered])).toEqual([
        ["a", 2, true],
        ["b", 2, true],
        ["c", 1, false],
        ["d", 1, false],
      ])
      // Another root is another consumer: it does not see these.
      await using other = await tempDir()
      expect(consumerName(other.path)).not.toBe(consumerName(root.path))
    },
    slow,
  )

  it(
    "a consumer gone for good has its entries taken by another after the lease, counted, and not before",
    async () => {
      await using s = await tempRedisStream(1500)
      await s.publish("x", "y")
      const dead = await open(as(s.url, "dead"))
      const held = await dead.receive(2, 2000)
      expect(held).toHaveLength(2)
      const taker = await open(as(s.url, "taker"))
      const started = Date.now()
      const taken = await receiveAll(taker, 2)
      expect(Date.now() - started).toBeGreaterThanOrEqual(1000)
      expect(taken.map((d) => [d.id, d.deliveryCount, d.redelivered])).toEqual(
        held.map((d) => [d.id, 2, true] as const),
      )
      expect((await s.pending()).map((p) => p.consumer)).toEqual(["taker", "taker"])
      await taker.ack(taken)
      expect(await s.unacked()).toBe(0)
    },
    slow,
  )

  it(
    "hands an entry released with a delay to another consumer too, not before the delay, counted again",
    async () => {
      await using s = await tempRedisStream(8000)
      await s.publish("r")
      const source = await open(as(s.url, "first"))
      const [d1] = await source.receive(1, 2000)
      if (d1 === undefined) throw new Error("nothing received")
      await source.release([d1], 2500)
      // Another consumer, whose first receive looks for idle entries at once, finds it only after the delay.
      const other = await open(as(s.url, "other"))
      const started = Date.now()
      const d2 = (await receiveAll(other, 1))[0]
      expect(Date.now() - started).toBeGreaterThanOrEqual(2000)
      expect([d2?.id, d2?.deliveryCount, d2?.redelivered]).toEqual([d1.id, 2, true])
      await other.ack(d2 ? [d2] : [])
      expect(await s.unacked()).toBe(0)
    },
    slow,
  )

  it(
    "entries of a read whose reply was lost with the connection come after the reconnect, not after the lease",
    async () => {
      await using proxy = await tcpProxy(6379)
      await using s = await tempRedisStream(60_000)
      const source = await open(as(s.url.replace(":6379/", `:${proxy.port}/`), "me"), {
        reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
      })
      await s.publish("a0")
      await source.ack(await source.receive(1, 2000))
      await s.publish("a1", "a2")
      // As a reply lost on the way: Redis delivered them to this consumer, which never saw them.
      await s.client.call("XREADGROUP", "GROUP", s.group, "me", "COUNT", "2", "STREAMS", s.stream, ">")
      proxy.cut(300)
      const again = await receiveAll(source, 2, 5000)
      expect(again.map((d) => [text(d), d.deliveryCount])).toEqual([
        ["a1", 2],
        ["a2", 2],
      ])
      await source.ack(again)
      expect(await s.unacked()).toBe(0)
    },
    slow,
  )

  it(
    "keeps other fields as headers, and publish adds an entry with the body and headers; a replay has an id of its own",
    async () => {
      await using s = await tempRedisStream()
      await s.client.xadd(s.stream, "*", "body", "original", "trace-id", "t-7")
      const source = await open(s.url)
      const [original] = await source.receive(1, 2000)
      if (original === undefined) throw new Error("nothing received")
      expect(original.origin.headers).toEqual({ "trace-id": "t-7" })
      await source.ack([original])
      const replay = { ...original.origin, headers: { ...original.origin.headers, [replayHeader]: "c-1" } }
      await source.publish(replay, new TextEncoder().encode("replayed"))
      await source.publish(replay, new TextEncoder().encode("replayed"))
      const again = await source.receive(5, 2000)
      expect(again.map((d) => [text(d), d.id, d.stableId])).toEqual([
        ["replayed", "replay-c-1", true],
        ["replayed", "replay-c-1", true],
      ])
      expect(again[0]?.origin.headers).toEqual({ "trace-id": "t-7", [replayHeader]: "c-1" })
      await source.ack(again)
      const gone = { ...original.origin, address: `${s.stream}-missing` }
      await expect(source.publish(gone, new TextEncoder().encode("x"))).rejects.toThrow(
        `stream "${s.stream}-missing" does not exist`,
      )
      expect(await s.client.exists(`${s.stream}-missing`)).toBe(0)
    },
    slow,
  )

  it(
    "an entry without one body field is a refused delivery, and a pending entry deleted from the stream is dropped",
    async () => {
      await using s = await tempRedisStream()
      await using root = await tempDir()
      await s.client.xadd(s.stream, "*", "msg_id", "m-1", "amount", "3")
      await s.client.xadd(s.stream, "*", "body", "1", "body", "2")
      await s.publish("fine", "deleted")
      const source = await open(s.url, { root: root.path })
      const batch = await source.receive(10, 2000)
      expect(batch.map((d) => d.refusal?.reason)).toEqual(["missing-field", "missing-field", undefined, undefined])
      expect(text(batch[0] as Delivery)).toBe('{"msg_id":"m-1","amount":"3"}\n')
      expect(batch[0]?.refusal?.detail).toContain('has no "body" field (it has fields "msg_id", "amount")')
      expect(batch[1]?.refusal?.detail).toContain('has 2 "body" fields')
      // Both bodies land: as an object, the second would hide the first.
      expect(text(batch[1] as Delivery)).toBe('[["body","1"],["body","2"]]\n')
      await source.ack(batch.slice(0, 3))
      await s.client.xdel(s.stream, (batch[3] as Delivery).id)
      await source.close()
      // Started again, it reads its pending list: the deleted entry has nothing to deliver and leaves it.
      const again = await open(s.url, { root: root.path })
      expect(await again.receive(10, 1000)).toEqual([])
      expect(await s.pending()).toEqual([])
    },
    slow,
  )

  it(
    "survives connections cut mid-batch and mid-wait: nothing lost, nothing doubled",
    async () => {
      await using proxy = await tcpProxy(6379)
      await using s = await tempRedisStream(30_000)
      const url = s.url.replace(":6379/", `:${proxy.port}/`)
      await s.publish(...Array.from({ length: 10 }, (_, i) => `a${i}`))
      const events: string[] = []
      const keep = (event: string) => void events.push(event)
      const log: Log = { warn: keep, notice: keep, info: keep, debug: keep }
      const source = await open(url, { log, reconnect: { initialDelayMs: 50, maxDelayMs: 200 } })
      const seen: Delivery[] = []
      const inHand = await source.receive(5, 2000)
      seen.push(...inHand)
      proxy.cut(500)
      await source.ack(inHand)
      const rest = await receiveAll(source, 5)
      seen.push(...rest)
      await source.ack(rest)
      const waiting = source.receive(5, 8000)
      await Bun.sleep(300)
      proxy.cut(500)
      await Bun.sleep(1000)
      await s.publish(...Array.from({ length: 5 }, (_, i) => `b${i}`))
      const late = await waiting
      seen.push(...late, ...(await receiveAll(source, 5 - late.length)))
      await source.ack(seen.slice(10))
      expect(proxy.forwarded).toBeGreaterThan(3)
      expect(events).toContain("source-retry")
      expect(seen.map(text).sort()).toEqual([
        ...Array.from({ length: 10 }, (_, i) => `a${i}`),
        ...Array.from({ length: 5 }, (_, i) => `b${i}`),
      ])
      expect(new Set(seen.map((d) => d.id)).size).toBe(15)
      expect(await s.unacked()).toBe(0)
    },
    slow,
  )

  it("says what to do when the group is destroyed while the source reads it", async () => {
    await using s = await tempRedisStream()
    const source = await open(s.url)
    expect(await source.receive(1, 200)).toEqual([])
    await s.client.call("XGROUP", "DESTROY", s.stream, s.group)
    const error = await source.receive(1, 200).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SpoolError)
    expect((error as SpoolError).message).toContain("is gone (deleted while spool read it); start again")
  })

  it("refuses a key that is not a stream, and a wrong password without echoing it", async () => {
    await using s = await tempRedisStream()
    const key = `${s.stream}-list`
    await s.client.rpush(key, "x")
    try {
      const wrongType = await openRedisSource(s.url.replace(`stream=${encodeURIComponent(s.stream)}`, `stream=${key}`))
        .then(() => undefined)
        .catch((e: unknown) => e)
      expect(wrongType).toBeInstanceOf(SpoolError)
      expect((wrongType as SpoolError).message).toContain("holds a list, not a stream")
    } finally {
      await s.client.del(key)
    }
    const refused = await openRedisSource(s.url.replace("redis://", "redis://nobody:hunter2@"))
      .then(() => undefined)
      .catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(SpoolError)
    expect((refused as SpoolError).code).toBe("usage")
    expect((refused as SpoolError).message).toContain("Redis refused the login")
    expect((refused as SpoolError).message).not.toContain("hunter2")
  })
})
