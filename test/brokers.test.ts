// consume --source against the machine's RabbitMQ and NATS JetStream, each test on a queue or
// stream of its own: generated messages end as the same files dropped into inbox/ do (the same
// rows, reports and error/ files, names aside), random SIGKILLs during a drain change nothing of
// that and leave nothing unacknowledged, nor does a connection cut mid-drain, and a message that
// crashes every consumer is poison.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  generateMessages,
  makeQueueFrom,
  readErrorCsv,
  requireServer,
  type Snapshot,
  snapshot,
  spool,
  tcpProxy,
  tempAmqpQueue,
  tempDir,
  tempJetStream,
  tempQueue,
} from "@spool/test-support"

const rabbit = await requireServer("RabbitMQ", "127.0.0.1", 5672, "rabbitmq-server")
const nats = await requireServer("NATS", "127.0.0.1", 4222, "nats-server -js -a 127.0.0.1 -p 4222")

/** A queue or stream of one test, and what the test asks of it. */
interface Broker extends AsyncDisposable {
  readonly url: string
  publish(bodies: readonly Uint8Array[]): Promise<void>
  /** Messages not yet acknowledged, once no consumer is connected. */
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
        // Each message gets a message-id of its own: the id a redelivery is recognised by.
        publish: (bodies) =>
          q.publish(
            ...bodies.map((b) => ({ body: new TextDecoder("utf-8", { fatal: true }).decode(b), id: `p-${n++}` })),
          ),
        unacked: () => q.ready(),
        [Symbol.asyncDispose]: () => q[Symbol.asyncDispose](),
      }
    },
  },
  {
    name: "NATS JetStream",
    it: nats,
    async open(): Promise<Broker> {
      const s = await tempJetStream(1000)
      return {
        url: s.url,
        publish: (bodies) => s.publish(...bodies),
        unacked: () => s.unacked(),
        [Symbol.asyncDispose]: () => s[Symbol.asyncDispose](),
      }
    },
  },
] as const

/** Generated message files, in name order (the order they are published in), and their bytes. */
async function generated(dir: string, count: number, seed: number): Promise<Uint8Array[]> {
  generateMessages(dir, count, seed)
  return fs
    .readdirSync(dir)
    .sort()
    .map((name) => new Uint8Array(fs.readFileSync(join(dir, name))))
}

/**
 * An end state with the names factored out (a landed name is not the dropped file's) and which
 * delivery of a msg_id came first (the broker's order is not the directory's): each msg_id's
 * deliveries by payload hash, each failure and error.csv row by the content of its error/ file.
 */
function nameFree(root: string, s: Snapshot) {
  const deliveries = new Map<string, string[]>()
  type Row = { msg_id: string; payload_hash: string }
  for (const d of [...(s.processed as Row[]), ...(s.duplicates as Row[])])
    deliveries.set(d.msg_id, [...(deliveries.get(d.msg_id) ?? []), d.payload_hash].sort())
  const content = (file: string) => s.error[file] ?? `not in error/: ${file}`
  return {
    inbox: Object.keys(s.inbox).length,
    processing: Object.keys(s.processing).length,
    claims: s.claims.length,
    done: Object.values(s.done).sort(),
    error: Object.values(s.error).sort(),
    processedIds: (s.processed as Row[]).map((r) => r.msg_id).sort(),
    deliveries: Object.fromEntries([...deliveries].sort(([a], [b]) => (a < b ? -1 : 1))),
    failures: (s.failures as { file: string; reason: string }[]).map((f) => `${f.reason} ${content(f.file)}`).sort(),
    dupTxt: s.dupTxt,
    errorCsv: [...readErrorCsv(root)].map(([file, reason]) => `${reason} ${content(file)}`).sort(),
  }
}

/** The end state of the same messages dropped as files into inbox/ and consumed once. */
async function droppedAsFiles(dir: string) {
  await using ref = await tempDir()
  const root = join(ref.path, "root")
  makeQueueFrom(dir, root)
  const r = await spool("consume", ["--root", root, "--quiet"])
  expect(r.exitCode, r.stderr).toBe(0)
  return nameFree(root, snapshot(root))
}

const consumeSource = (root: string, url: string, more: readonly string[] = [], env?: Record<string, string>) =>
  spool("consume", ["--root", root, "--source", url, "--quiet", ...more], env)

describe("consume --source, told something it cannot use", () => {
  it("refuses a scheme it has no adapter for, and --concurrency, with exit 2 and what to write", async () => {
    await using q = await tempQueue()
    const kafka = await consumeSource(q.root, "kafka://user:secret@broker:9092/orders")
    expect(kafka.exitCode).toBe(2)
    expect(kafka.stderr).toContain("unknown scheme kafka:")
    expect(kafka.stderr).toContain("amqp://")
    expect(kafka.stderr).toContain("nats://")
    expect(kafka.stderr).not.toContain("secret")
    const workers = await consumeSource(q.root, "nats://127.0.0.1:4222/?stream=S&consumer=C", ["--concurrency", "2"])
    expect(workers.exitCode).toBe(2)
    expect(workers.stderr).toContain("--concurrency does not take --source")
    const help = await spool("consume", ["--help"])
    expect(help.stdout).toContain("--source URL")
    expect(help.stdout).toContain("--idle-wait")
  })
})

for (const broker of brokers)
  describe(`consume --source on ${broker.name}`, () => {
    broker.it(
      "ends as the same messages dropped as files: rows, reports and error/ files, nothing left unacknowledged",
      async () => {
        await using dir = await tempDir()
        const bodies = await generated(dir.path, 300, 24)
        const expected = await droppedAsFiles(dir.path)
        await using b = await broker.open()
        await b.publish(bodies)
        await using q = await tempQueue()
        const r = await consumeSource(q.root, b.url, ["--batch-size", "50"])
        expect(r.exitCode, r.stderr).toBe(0)
        expect(nameFree(q.root, snapshot(q.root))).toEqual(expected)
        expect(expected.error.length).toBeGreaterThan(10)
        expect(Object.keys(expected.deliveries).length).toBeLessThan(bodies.length)
        expect(await b.unacked()).toBe(0)
        // A second drain finds nothing and changes nothing.
        const again = await consumeSource(q.root, b.url)
        expect(again.exitCode, again.stderr).toBe(0)
        expect(nameFree(q.root, snapshot(q.root))).toEqual(expected)
      },
      120_000,
    )

    broker.it(
      "random SIGKILLs during a drain, then one more run, end in that same state with nothing unacknowledged",
      async () => {
        await using dir = await tempDir()
        const bodies = await generated(dir.path, 200, 7)
        const expected = await droppedAsFiles(dir.path)
        await using b = await broker.open()
        await b.publish(bodies)
        await using q = await tempQueue()
        let kills = 0
        let seed = 11
        const random = () => {
          seed = (seed * 1103515245 + 12345) % 2 ** 31
          return seed / 2 ** 31
        }
        // Kill at random instants until a run drains without being killed.
        for (let round = 0; round < 40; round++) {
          const proc = Bun.spawn(
            [
              "bun",
              "packages/consumer/bin/consume.ts",
              "--root",
              q.root,
              "--source",
              b.url,
              "--batch-size",
              "20",
              "--quiet",
            ],
            { cwd: join(import.meta.dir, ".."), stdout: "ignore", stderr: "pipe" },
          )
          const killAt = 150 + Math.floor(random() * 900)
          const timer = setTimeout(() => {
            kills++
            proc.kill("SIGKILL")
          }, killAt)
          const code = await proc.exited
          clearTimeout(timer)
          if (code === 0 && (await b.unacked()) === 0) break
          expect([0, 137, null]).toContain(proc.signalCode === "SIGKILL" ? 137 : code)
          // A killed consumer's deliveries come back: at once on RabbitMQ, after ack_wait on JetStream.
          await Bun.sleep(1200)
        }
        const last = await consumeSource(q.root, b.url)
        expect(last.exitCode, last.stderr).toBe(0)
        expect(kills).toBeGreaterThan(0)
        const actual = nameFree(q.root, snapshot(q.root))
        // A delivery in hand at two kills is poison by design (as for files): none here may be.
        expect(actual.failures.filter((f) => f.startsWith("poison"))).toEqual([])
        expect(actual).toEqual(expected)
        expect(await b.unacked()).toBe(0)
      },
      300_000,
    )

    broker.it(
      "a connection cut mid-drain (sockets reset, broker out of reach a while) ends in that same state, nothing unacknowledged",
      async () => {
        await using dir = await tempDir()
        const bodies = await generated(dir.path, 300, 31)
        const expected = await droppedAsFiles(dir.path)
        await using b = await broker.open()
        await b.publish(bodies)
        await using q = await tempQueue()
        const url = new URL(b.url)
        await using proxy = await tcpProxy(Number(url.port))
        const proxied = b.url.replace(`:${url.port}/`, `:${proxy.port}/`)
        const proc = Bun.spawn(
          [
            "bun",
            "packages/consumer/bin/consume.ts",
            "--root",
            q.root,
            "--source",
            proxied,
            "--batch-size",
            "20",
            "--idle-wait",
            "3s",
            "--quiet",
          ],
          { cwd: join(import.meta.dir, ".."), stdout: "ignore", stderr: "pipe" },
        )
        const done = () => fs.readdirSync(join(q.root, "done")).length
        for (let i = 0; i < 600 && done() < 40; i++) await Bun.sleep(10)
        proxy.cut(1500)
        const doneAtCut = done()
        expect(doneAtCut).toBeGreaterThan(0)
        expect(doneAtCut).toBeLessThan(bodies.length)
        const code = await proc.exited
        const stderr = await new Response(proc.stderr).text()
        expect(code, stderr).toBe(0)
        // The run connected again by itself after the cut.
        expect(proxy.forwarded).toBeGreaterThan(1)
        // What the cut run left (deliveries in hand, acks lost with the sockets) comes again to a rerun.
        for (let round = 0; round < 5 && (await b.unacked()) > 0; round++) {
          await Bun.sleep(1200)
          const again = await consumeSource(q.root, proxied, ["--idle-wait", "3s"])
          expect(again.exitCode, again.stderr).toBe(0)
        }
        const actual = nameFree(q.root, snapshot(q.root))
        expect(actual.failures.filter((f) => f.startsWith("poison"))).toEqual([])
        expect(actual).toEqual(expected)
        expect(await b.unacked()).toBe(0)
      },
      120_000,
    )

    broker.it(
      "--watch runs until SIGTERM, finishes the batch in hand, exits 0; the next run takes the rest",
      async () => {
        await using b = await broker.open()
        const bodies = Array.from({ length: 400 }, (_, i) =>
          new TextEncoder().encode(`{"msg_id":"w-${i}","order_no":"W","seq":${i + 1},"amount":1.25}`),
        )
        await b.publish(bodies)
        await using q = await tempQueue()
        const proc = Bun.spawn(
          [
            "bun",
            "packages/consumer/bin/consume.ts",
            "--root",
            q.root,
            "--source",
            b.url,
            "--watch",
            "--batch-size",
            "10",
          ],
          { cwd: join(import.meta.dir, ".."), stdout: "ignore", stderr: "pipe" },
        )
        await Bun.sleep(1500)
        proc.kill("SIGTERM")
        expect(await proc.exited).toBe(0)
        const stopped = snapshot(q.root)
        expect(stopped.processing).toEqual({})
        expect(stopped.claims).toEqual([])
        const rest = await consumeSource(q.root, b.url, ["--idle-wait", "3s"])
        expect(rest.exitCode, rest.stderr).toBe(0)
        const s = snapshot(q.root)
        expect(s.processed).toHaveLength(400)
        expect(s.duplicates).toEqual([])
        expect(await b.unacked()).toBe(0)
      },
      60_000,
    )

    broker.it(
      "a batch committed and moved but not acknowledged is recognised when it comes again: acked, nothing recorded",
      async () => {
        await using b = await broker.open()
        const bodies = Array.from({ length: 5 }, (_, i) =>
          new TextEncoder().encode(`{"msg_id":"r-${i}","order_no":"R","seq":${i + 1},"amount":2.50}`),
        )
        await b.publish(bodies)
        await using q = await tempQueue()
        // Killed after its files left processing/, before the ack.
        const killed = await consumeSource(q.root, b.url, [], { SPOOL_FAULT: "after-move" })
        expect(killed.exitCode).toBe(137)
        const before = snapshot(q.root)
        expect(Object.keys(before.done)).toHaveLength(5)
        const again = await consumeSource(q.root, b.url, ["--idle-wait", "3s"])
        expect(again.exitCode, again.stderr).toBe(0)
        expect(again.stderr).toContain("redelivered=5")
        const after = snapshot(q.root)
        expect(after.processed).toEqual(before.processed)
        expect(after.duplicates).toEqual([])
        expect(after.done).toEqual(before.done)
        expect(await b.unacked()).toBe(0)
      },
      60_000,
    )

    broker.it(
      "a message that crashes every consumer ends in error/ as poison, and the rest flow",
      async () => {
        await using b = await broker.open()
        const good = (i: number) =>
          new TextEncoder().encode(`{"msg_id":"g-${i}","order_no":"A","seq":${i + 1},"amount":1.00}`)
        await b.publish([good(0), good(1), good(2)])
        await using q = await tempQueue()
        // The landed name of the second message: its AMQP message-id, or its stream sequence.
        const landed =
          broker.name === "RabbitMQ"
            ? `amqp-${new URL(b.url).searchParams.get("queue")}-p-1.json`
            : `nats-${new URL(b.url).searchParams.get("stream")}-2.json`
        const env = { SPOOL_CRASH_ON: landed }
        let crashes = 0
        for (let round = 0; round < 10; round++) {
          const r = await consumeSource(q.root, b.url, ["--max-attempts", "3"], env)
          if (r.exitCode === 0 && (await b.unacked()) === 0) break
          crashes++
          await Bun.sleep(1200)
        }
        expect(crashes).toBe(3)
        const s = snapshot(q.root)
        expect(s.failures).toEqual([{ file: landed, original: landed, reason: "poison" }])
        expect(Object.keys(s.error)).toEqual([landed])
        expect((s.processed as { msg_id: string }[]).map((r) => r.msg_id)).toEqual(["g-0", "g-2"])
        expect(await b.unacked()).toBe(0)
      },
      120_000,
    )
  })
