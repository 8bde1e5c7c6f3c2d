// The JetStream source against the machine's NATS server, in what is its own: ack_wait, the
// durable consumer, Nats-Msg-Id, cut connections, process exits. What every source does is in
// ../contract.test.ts. Each test on a stream of its own, deleted afterwards.
import { describe, expect } from "bun:test"
import { AckPolicy, type ConsumerInfo, jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect, headers, nanos } from "@nats-io/transport-node"
import { requireServer, tcpProxy } from "@spool/test-support"
import { SpoolError } from "../../errors.ts"
import type { Log } from "../../log.ts"
import type { Delivery } from "../port.ts"
import { type JetStreamSource, type JetStreamSourceOptions, openJetStreamSource } from "./source.ts"

const it = await requireServer("NATS", "127.0.0.1", 4222, "nats-server -js -a 127.0.0.1 -p 4222")
// Waits on ack_wait and reconnects take seconds; a 2-core machine under load takes more.
const slow = 60_000
const encoder = new TextEncoder()
const text = (delivery: Delivery) => new TextDecoder().decode(delivery.body)

/** A stream of the test's own, with its admin connection; disposing it deletes the stream. */
async function tempStream(port = 4222) {
  const nc = await connect({ servers: "127.0.0.1:4222" })
  const jsm = await jetstreamManager(nc)
  const js = jetstream(nc)
  const name = `SPOOL_TEST_${crypto.randomUUID().slice(0, 8).toUpperCase()}`
  const subject = `${name.toLowerCase()}.orders`
  await jsm.streams.add({ name, subjects: [`${name.toLowerCase()}.>`] })
  const sources: JetStreamSource[] = []
  return {
    name,
    subject,
    jsm,
    url: (consumer = "spool") => `nats://127.0.0.1:${port}/?stream=${name}&consumer=${consumer}`,
    async open(options: JetStreamSourceOptions = {}, consumer = "spool", at = port) {
      const source = await openJetStreamSource(`nats://127.0.0.1:${at}/?stream=${name}&consumer=${consumer}`, options)
      sources.push(source)
      return source
    },
    async publish(count: number, prefix = "m") {
      for (let i = 0; i < count; i++) await js.publish(subject, encoder.encode(`${prefix}${i}`))
    },
    info: (consumer = "spool"): Promise<ConsumerInfo> => jsm.consumers.info(name, consumer),
    async [Symbol.asyncDispose]() {
      for (const source of sources) await source.close()
      await jsm.streams.delete(name).catch(() => {})
      await nc.close()
    },
  }
}

/** A port on 127.0.0.1 nothing listens on (it was free a moment ago). */
async function closedPort(): Promise<number> {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const { port } = server
  server.stop(true)
  return port
}

/** Receives until `count` deliveries came or `ms` passed. */
async function receiveAll(source: JetStreamSource, count: number, ms = 10_000): Promise<Delivery[]> {
  const got: Delivery[] = []
  const end = Date.now() + ms
  while (got.length < count && Date.now() < end) got.push(...(await source.receive(count - got.length, 1000)))
  return got
}

describe("JetStream source", () => {
  it(
    "receives at most max and leaves the rest on the server unfetched",
    async () => {
      await using stream = await tempStream()
      await stream.publish(10)
      const source = await stream.open()
      const batch = await source.receive(4, 2000)
      expect(batch.map(text)).toEqual(["m0", "m1", "m2", "m3"])
      expect(batch.map((d) => d.id)).toEqual([1, 2, 3, 4].map((seq) => `${stream.name}:${seq}`))
      expect(batch.every((d) => d.stableId && d.deliveryCount === 1 && !d.redelivered)).toBe(true)
      expect(batch[0]?.origin).toEqual({ source: stream.url(), address: stream.subject })
      const held = await stream.info()
      expect([held.num_ack_pending, held.num_pending]).toEqual([4, 6])
      // What is there is taken without waiting out waitMs (a minute) for a full batch.
      const started = Date.now()
      const rest = await source.receive(100, 60_000)
      expect(rest.map(text)).toEqual(["m4", "m5", "m6", "m7", "m8", "m9"])
      expect(Date.now() - started).toBeLessThan(30_000)
      await source.ack([...batch, ...rest])
      const after = await stream.info()
      expect([after.num_ack_pending, after.num_pending, after.ack_floor.stream_seq]).toEqual([0, 0, 10])
    },
    slow,
  )

  it(
    "keeps text headers in the origin, and publish stores them again without Nats-Msg-Id, confirmed",
    async () => {
      await using stream = await tempStream()
      const nc = await connect({ servers: "127.0.0.1:4222" })
      const sent = headers()
      sent.set("Order-Id", "7")
      sent.set("Nats-Msg-Id", "order-7")
      await jetstream(nc).publish(stream.subject, encoder.encode("original"), { headers: sent })
      await nc.close()
      const source = await stream.open()
      const [original] = await source.receive(1, 2000)
      if (original === undefined) throw new Error("nothing received")
      expect(original.origin.headers).toEqual({ "Order-Id": "7", "Nats-Msg-Id": "order-7" })
      await source.ack([original])
      // Within the stream's duplicate window: the original's Nats-Msg-Id would have it dropped.
      await source.publish(original.origin, encoder.encode("replayed"))
      expect((await stream.jsm.streams.info(stream.name)).state.messages).toBe(2)
      const [replayed] = await source.receive(1, 2000)
      expect(replayed && text(replayed)).toBe("replayed")
      expect(replayed?.id).toBe(`${stream.name}:2`)
      expect(replayed?.origin.headers?.["Order-Id"]).toBe("7")
      expect(replayed?.origin.headers?.["Nats-Msg-Id"]).not.toBe("order-7")
      const elsewhere = { ...original.origin, address: "spool.nowhere.stored" }
      await expect(source.publish(elsewhere, encoder.encode("x"))).rejects.toThrow(
        'no JetStream stream stores subject "spool.nowhere.stored"',
      )
    },
    slow,
  )

  it(
    "confirms an ack, and an ack of a delivery already redelivered elsewhere is not an error",
    async () => {
      await using stream = await tempStream()
      await stream.publish(1)
      const first = await stream.open({ ackWaitMs: 1000 })
      const second = await stream.open()
      expect(second.ackWaitMs).toBe(1000)
      const [held] = await first.receive(1, 2000)
      await Bun.sleep(1500)
      const [again] = await second.receive(1, 3000)
      expect(again?.id).toBe(held?.id as string)
      expect([again?.deliveryCount, again?.redelivered]).toEqual([2, true])
      await first.ack(held ? [held] : [])
      await second.ack(again ? [again] : [])
      const info = await stream.info()
      expect([info.num_ack_pending, info.ack_floor.stream_seq]).toEqual([0, 1])
    },
    slow,
  )

  it(
    "survives connections cut from the server side mid-batch and mid-wait: nothing lost, nothing doubled",
    async () => {
      await using proxy = await tcpProxy(4222)
      await using stream = await tempStream(proxy.port)
      await stream.publish(10, "a")
      const source = await stream.open({ ackWaitMs: 2000, timeoutMs: 1000 })
      const seen: Delivery[] = []
      // A batch in hand while the connection is cut: its ack is written into the dead socket.
      const inHand = await source.receive(5, 2000)
      seen.push(...inHand)
      proxy.cut()
      await source.ack(inHand)
      const rest = await receiveAll(source, 5)
      seen.push(...rest)
      await source.ack(rest)
      // A receive waiting on an empty consumer while the connection is cut: messages published
      // after the reconnect still reach it.
      const waiting = source.receive(5, 8000)
      await Bun.sleep(300)
      proxy.cut()
      await Bun.sleep(2500)
      await stream.publish(5, "b")
      const late = await waiting
      seen.push(...late, ...(await receiveAll(source, 5 - late.length)))
      await source.ack(seen.slice(10))
      expect(proxy.forwarded).toBeGreaterThanOrEqual(3)
      const texts = seen.map(text).sort()
      expect(texts).toEqual([
        ...[0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((i) => `a${i}`),
        ...[0, 1, 2, 3, 4].map((i) => `b${i}`),
      ])
      expect(new Set(seen.map((d) => d.id)).size).toBe(15)
      // Nothing comes again after ack_wait: every ack reached the server.
      await Bun.sleep(2500)
      expect(await source.receive(5, 1000)).toEqual([])
      const info = await stream.info()
      expect([info.num_ack_pending, info.num_pending, info.num_redelivered]).toEqual([0, 0, 0])
    },
    slow,
  )

  it(
    "a release written into a cut connection still redelivers at once after the reconnect, not after ack_wait",
    async () => {
      await using proxy = await tcpProxy(4222)
      await using stream = await tempStream(proxy.port)
      await stream.publish(1)
      // ack_wait far above what the test takes: a redelivery that waited it out would take two minutes.
      const source = await stream.open({ ackWaitMs: 120_000, timeoutMs: 1000 })
      const [held] = await source.receive(1, 2000)
      if (held === undefined) throw new Error("nothing received")
      proxy.cut()
      const started = Date.now()
      await source.release([held])
      const [again] = await source.receive(1, 150_000)
      expect(Date.now() - started).toBeLessThan(60_000)
      expect([again?.id, again?.deliveryCount]).toEqual([held.id, 2])
      expect(proxy.forwarded).toBeGreaterThanOrEqual(2)
      await source.ack(again ? [again] : [])
    },
    slow,
  )

  it(
    "receive fails, saying so, when the broker stays unreachable or the consumer is deleted",
    async () => {
      await using proxy = await tcpProxy(4222)
      await using stream = await tempStream(proxy.port)
      const cutOff = await stream.open({ outageMs: 1500 })
      proxy.pause(true)
      proxy.cut()
      await expect(cutOff.receive(1, 1000)).rejects.toThrow(`NATS at ${stream.url()} has been unreachable for 1.5 s`)
      proxy.pause(false)
      const orphan = await stream.open({}, "doomed", 4222)
      // The failure is caught as soon as it comes: it can come while the delete is still awaited,
      // and a rejection no one has taken by then fails the test run as unhandled.
      const waiting = orphan.receive(1, 10_000).then(
        () => undefined,
        (error: unknown) => error,
      )
      await Bun.sleep(300)
      await stream.jsm.consumers.delete(stream.name, "doomed")
      const failure = await waiting
      expect(failure).toBeInstanceOf(Error)
      expect(String(failure)).toContain('the consumer "doomed" of stream')
    },
    slow,
  )

  it(
    "leaves the deliveries a SIGKILLed process held to be redelivered after ack_wait",
    async () => {
      await using stream = await tempStream()
      await stream.publish(3)
      const survivor = await stream.open({ ackWaitMs: 1500 })
      const child = Bun.spawn(
        [
          "bun",
          "-e",
          `const { openJetStreamSource } = await import(${JSON.stringify(`${import.meta.dir}/source.ts`)})
         const source = await openJetStreamSource(process.env.SOURCE_URL)
         const batch = await source.receive(10, 5000)
         console.log(JSON.stringify(batch.map((d) => d.id)))
         setInterval(() => {}, 1000)`,
        ],
        { env: { ...process.env, SOURCE_URL: stream.url() }, stdout: "pipe", stderr: "inherit" },
      )
      const reader = child.stdout.getReader()
      const line = await Promise.race([reader.read(), Bun.sleep(20_000).then(() => undefined)])
      const held: string[] = JSON.parse(new TextDecoder().decode(line?.value ?? new Uint8Array()) || "[]")
      expect(held).toEqual([1, 2, 3].map((seq) => `${stream.name}:${seq}`))
      expect((await stream.info()).num_ack_pending).toBe(3)
      child.kill("SIGKILL")
      expect(await child.exited).not.toBe(0)
      const redelivered = await receiveAll(survivor, 3)
      expect(redelivered.map((d) => d.id)).toEqual(held)
      expect(redelivered.every((d) => d.deliveryCount === 2 && d.redelivered)).toBe(true)
      await survivor.ack(redelivered)
    },
    slow,
  )

  it(
    "creates a missing consumer with explicit acks and unlimited deliveries, and uses an existing one as it is",
    async () => {
      await using stream = await tempStream()
      const created = await stream.open({ ackWaitMs: 4000 })
      const { config } = await stream.info()
      expect([config.durable_name, config.ack_policy, config.max_deliver, config.ack_wait]).toEqual([
        "spool",
        AckPolicy.Explicit,
        -1,
        nanos(4000),
      ])
      expect(config.deliver_subject).toBeUndefined()
      expect(created.ackWaitMs).toBe(4000)
      await stream.jsm.consumers.add(stream.name, {
        durable_name: "mine",
        ack_policy: AckPolicy.Explicit,
        ack_wait: nanos(7000),
        max_deliver: 5,
      })
      const existing = await stream.open({ ackWaitMs: 4000 }, "mine")
      expect(existing.ackWaitMs).toBe(7000)
      expect((await stream.info("mine")).config.max_deliver).toBe(5)
    },
    slow,
  )

  it(
    "refuses a missing stream and a consumer that does not ack explicitly, saying what to do",
    async () => {
      await using stream = await tempStream()
      const missing = openJetStreamSource("nats://127.0.0.1:4222/?stream=SPOOL_TEST_ABSENT&consumer=spool")
      await expect(missing).rejects.toThrow(
        'the JetStream stream "SPOOL_TEST_ABSENT" does not exist at nats://127.0.0.1:4222/?stream=SPOOL_TEST_ABSENT&consumer=spool: create it',
      )
      await expect(missing).rejects.toBeInstanceOf(SpoolError)
      await stream.jsm.consumers.add(stream.name, { durable_name: "lossy", ack_policy: AckPolicy.None })
      await expect(stream.open({}, "lossy")).rejects.toThrow(
        "has ack_policy none; spool acknowledges each delivery after its commit",
      )
    },
    slow,
  )

  it(
    "waits for a server out of reach at the start as long as outageMs allows, and a stop ends the wait at once",
    async () => {
      await using stream = await tempStream()
      const port = await closedPort()
      const url = `nats://127.0.0.1:${port}/?stream=${stream.name}&consumer=spool`
      await expect(openJetStreamSource(url, { outageMs: 1500 })).rejects.toThrow(
        `NATS at ${url} could not be reached for 2 s (connection refused); check that it runs and that the URL's host and port are right`,
      )
      // Stopped while it waits: rejected with the stop's reason, long before the default minute.
      const stop = new AbortController()
      const started = Date.now()
      setTimeout(() => stop.abort(new Error("stopped")), 300)
      await expect(openJetStreamSource(url, { signal: stop.signal })).rejects.toThrow("stopped")
      expect(Date.now() - started).toBeLessThan(30_000)
      // A server that comes up within the allowance is connected to, each wait reported.
      const retries: unknown[] = []
      const keep = (msg: string, fields?: unknown) => (msg === "source-retry" ? retries.push(fields) : undefined)
      const log: Log = { warn: keep, notice: keep, info: keep, debug: keep }
      const opening = stream.open({ log }, "spool", port)
      await Bun.sleep(800)
      await using _up = await tcpProxy(4222, "127.0.0.1", port)
      const source = await opening
      await stream.publish(1)
      expect((await receiveAll(source, 1)).map(text)).toEqual(["m0"])
      expect(retries.length).toBeGreaterThan(0)
      expect(retries[0]).toMatchObject({ source: url, attempt: 1, error: "connection refused" })
    },
    slow,
  )

  it(
    "refuses a server that is not NATS, or says nothing, and leaves nothing behind that holds the process open",
    async () => {
      // One port that accepts and says nothing (as Redis and HTTP do), one that greets otherwise.
      const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
      const other = Bun.listen({
        hostname: "127.0.0.1",
        port: 0,
        socket: { open: (s) => void s.write("-ERR hello\r\n"), data() {} },
      })
      try {
        const url = (port: number) => `nats://127.0.0.1:${port}/?stream=S&consumer=c`
        const script =
          `const { openJetStreamSource } = await import(${JSON.stringify(`${import.meta.dir}/source.ts`)});` +
          `await openJetStreamSource(process.argv[1], { timeoutMs: 500 }).catch((e) => console.log(e.code, e.message))`
        const check = "check the URL's host and port (NATS listens on 4222 by default)"
        for (const [port, says] of [
          [
            silent.port,
            `io ${url(silent.port)} sent no INFO greeting within 500 ms: it is not a NATS server, or one that does not answer; ${check}`,
          ],
          [other.port, `usage ${url(other.port)} is not a NATS server: it greeted with "-ERR hello\\r\\n"; ${check}`],
        ] as const) {
          const child = Bun.spawn(["bun", "-e", script, url(port)], { stdout: "pipe", stderr: "inherit" })
          // The client's own timeout leaves its socket open: the child would never end by itself.
          const killer = setTimeout(() => child.kill(), 30_000)
          const out = (await new Response(child.stdout).text()).trim()
          await child.exited
          clearTimeout(killer)
          expect(out).toBe(says)
          expect(child.signalCode).toBeNull()
          expect(child.exitCode).toBe(0)
        }
      } finally {
        silent.stop(true)
        other.stop(true)
      }
    },
    slow,
  )

  it(
    "close leaves nothing behind that holds the process open",
    async () => {
      await using stream = await tempStream()
      await stream.publish(2)
      const script =
        `const { openJetStreamSource } = await import(${JSON.stringify(`${import.meta.dir}/source.ts`)});` +
        `const source = await openJetStreamSource(${JSON.stringify(stream.url())}, { timeoutMs: 90000 });` +
        "await source.ack(await source.receive(2, 1000)); await source.close(); console.log(Date.now())"
      const child = Bun.spawn(["bun", "-e", script], { stdout: "pipe", stderr: "inherit" })
      const closedAt = Number((await new Response(child.stdout).text()).trim())
      await child.exited
      expect(child.exitCode).toBe(0)
      // Far under the 90 s timeout close bounds its drain with.
      expect(Date.now() - closedAt).toBeLessThan(45_000)
      expect((await stream.info()).num_ack_pending).toBe(0)
    },
    slow,
  )
})
