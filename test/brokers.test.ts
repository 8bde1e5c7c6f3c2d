// consume --source against the machine's RabbitMQ, NATS JetStream, Redis and Mosquitto, each test on
// a queue, stream or topic of its own: generated messages end as the same files dropped into inbox/
// do (the same rows, reports and error/ files, names aside); random SIGKILLs during a drain change
// nothing of that but the messages they make poison by design (which end as such files do when
// they crash every consumer) and leave nothing unacknowledged, nor does a connection cut
// mid-drain; and a message that crashes every consumer is poison. On a classic queue, a quorum
// queue (which counts deliveries), JetStream, a Redis stream and an MQTT session.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  generateMessages,
  makeQueueFrom,
  pgUnavailable,
  readErrorCsv,
  requireServer,
  type Snapshot,
  snapshot,
  spool,
  tcpProxy,
  tempAmqpQueue,
  tempDatabase,
  tempDir,
  tempJetStream,
  tempMqttTopic,
  tempQueue,
  tempRedisStream,
} from "@spool/test-support"
import { SQL } from "bun"

const rabbit = await requireServer("RabbitMQ", "127.0.0.1", 5672, "rabbitmq-server")
const nats = await requireServer("NATS", "127.0.0.1", 4222, "nats-server -js -a 127.0.0.1 -p 4222")
const mosquitto = await requireServer("Mosquitto", "127.0.0.1", 1883, "mosquitto -d -c /etc/mosquitto/mosquitto.conf")
const redis = await requireServer("Redis", "127.0.0.1", 6379, "redis-server --daemonize yes --save ''")
const pgSkip = await pgUnavailable()
if (pgSkip !== undefined) console.warn(pgSkip)

/** A queue or stream of one test, and what the test asks of it. */
interface Broker extends AsyncDisposable {
  readonly url: string
  publish(bodies: readonly Uint8Array[]): Promise<void>
  /** Messages not yet acknowledged, once no consumer is connected. */
  unacked(): Promise<number>
  /** The name the `index`-th message published lands under, where the broker picks its id. */
  landedName?(index: number): string
}

/** A RabbitMQ queue of `type`; each message gets a message-id of its own: the id a redelivery is recognised by. */
async function amqpBroker(type: "classic" | "quorum"): Promise<Broker> {
  const q = await tempAmqpQueue(type)
  let n = 0
  return {
    url: q.url,
    publish: (bodies) =>
      q.publish(...bodies.map((b) => ({ body: new TextDecoder("utf-8", { fatal: true }).decode(b), id: `p-${n++}` }))),
    unacked: () => q.ready(),
    [Symbol.asyncDispose]: () => q[Symbol.asyncDispose](),
  }
}

const brokers = [
  { name: "RabbitMQ", it: rabbit, open: () => amqpBroker("classic"), counts: false },
  // A quorum queue counts deliveries (x-delivery-count). Before RabbitMQ 4.3 it counts every
  // return, a killed consumer's prefetched deliveries that no one read included, so a kill may
  // have been in hand at twice a batch: each delivery counted --max-attempts times is taken alone.
  { name: "a RabbitMQ quorum queue", it: rabbit, open: () => amqpBroker("quorum"), counts: true },
  {
    name: "NATS JetStream",
    it: nats,
    counts: true,
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
  {
    name: "Redis Streams",
    it: redis,
    counts: true,
    async open(): Promise<Broker> {
      const s = await tempRedisStream(1000)
      const ids: string[] = []
      return {
        url: s.url,
        publish: async (bodies) => void ids.push(...(await s.publish(...bodies))),
        unacked: () => s.unacked(),
        landedName: (index) => `redis-${s.stream}-${ids[index]}.json`,
        [Symbol.asyncDispose]: () => s[Symbol.asyncDispose](),
      }
    },
  },
  {
    name: "MQTT",
    it: mosquitto,
    counts: false,
    // MQTT gives a message no identity: the same bytes published twice share a landed name, and a
    // copy in hand at a kill comes back DUP set and is taken for the copy already committed.
    isIdentityTheBody: true,
    async open(): Promise<Broker> {
      const t = await tempMqttTopic()
      return {
        url: t.url(),
        publish: (bodies) => t.publish(bodies),
        // The consumer's session, resumed with nothing PUBACKed: what it still holds arrives.
        unacked: () => t.unacked(),
        [Symbol.asyncDispose]: () => t[Symbol.asyncDispose](),
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

/**
 * The state with every repeat of the same entry kept once: where a message's identity is its body,
 * a copy of the same bytes in hand at a kill is recognised as the copy committed before it (no
 * second effect, no duplicate recorded), so only which distinct deliveries ended where compares.
 */
function distinct(state: ReturnType<typeof nameFree>) {
  const once = (xs: readonly string[]) => [...new Set(xs)].sort()
  return {
    ...state,
    done: once(state.done),
    error: once(state.error),
    processedIds: once(state.processedIds),
    deliveries: Object.fromEntries(Object.entries(state.deliveries).map(([id, hashes]) => [id, once(hashes)])),
    failures: once(state.failures),
    // A msg_id whose only repeats are copies of the same bytes may be recorded no duplicate at all.
    dupTxt: once((state.dupTxt ?? "").split("\n").filter((id) => once(state.deliveries[id] ?? []).length > 1)),
    errorCsv: once(state.errorCsv),
  }
}

/**
 * The end state of the same messages dropped as files into inbox/ and consumed once; with
 * `crashOn`, of files consumed until done where those files crash every consumer that reads them
 * (SPOOL_CRASH_ON), which is what poison stands for.
 */
async function droppedAsFiles(dir: string, crashOn: readonly string[] = []) {
  await using ref = await tempDir()
  const root = join(ref.path, "root")
  makeQueueFrom(dir, root)
  // Each crashing file kills up to --max-attempts runs before it is poison.
  for (let run = 0; ; run++) {
    const r = await spool("consume", ["--root", root, "--quiet"], { SPOOL_CRASH_ON: crashOn.join("/") })
    if (r.exitCode === 0) break
    expect(r.exitCode, r.stderr).toBe(137)
    expect(run, `crashed ${run + 1} times on ${crashOn.length} files`).toBeLessThan((crashOn.length + 1) * maxAttempts)
  }
  return nameFree(root, snapshot(root))
}

/** consume's default --max-attempts, which every random-kill run uses. */
const maxAttempts = 3
/** The batch size of the random-kill runs. */
const killBatch = 20

/**
 * The generated files the random kills made poison by design: a landed file in hand at a kill that
 * found it alone and its last attempt counted (recovery's retry, or a delivery the broker had
 * counted `maxAttempts` times), its earlier attempts from the broker's count, is refused by
 * recovery (recover.ts: "no commit in N attempts; ..."). Every poison failure must
 * say so, N from `maxAttempts` to one more than the kills, and there can be no more of them than
 * kills. Each is mapped to the generated file of the same bytes; a poison failure outside that rule, or
 * one with no such file, fails the test here.
 */
function poisonedByKills(root: string, dir: string, kills: number): string[] {
  using db = new Database(join(root, "ledger.db"), { readonly: true })
  const poison = db.query("SELECT file, detail FROM failures WHERE reason = 'poison' ORDER BY file").all() as {
    file: string
    detail: string
  }[]
  for (const p of poison) {
    const counted = /^no commit in (\d+) attempts; the consumer died with it alone in hand on the last$/.exec(p.detail)
    const times = Number(counted?.[1] ?? Number.NaN)
    expect(times >= maxAttempts && times <= kills + 1, `${p.file}: ${p.detail} (${kills} kills)`).toBe(true)
  }
  // Only a delivery judged alone is poisoned by a kill, so a kill makes one at most: a batch in
  // hand is never poisoned whole.
  expect(poison.length).toBeLessThanOrEqual(kills)
  const files = fs.readdirSync(dir).sort()
  const taken = new Set<string>()
  return poison.map((p) => {
    const bytes = fs.readFileSync(join(root, "error", p.file))
    // Two generated files of the same bytes are interchangeable once names are factored out.
    const same = files.find((f) => !taken.has(f) && bytes.equals(fs.readFileSync(join(dir, f))))
    expect(same, `${p.file}: no generated file has its bytes`).toBeDefined()
    taken.add(same as string)
    return same as string
  })
}

/**
 * The name the `index`-th message published on `b` (its bytes `body`) lands under: its AMQP
 * message-id, its stream sequence, its entry id, or its body's hash.
 */
function landedAs(brokerName: string, b: Broker, index: number, body: Uint8Array): string {
  const param = (name: string) => new URL(b.url).searchParams.get(name)
  return (
    b.landedName?.(index) ??
    (brokerName === "MQTT"
      ? `mqtt-sha256-${Bun.CryptoHasher.hash("sha256", body, "hex")}.json`
      : brokerName === "NATS JetStream"
        ? `nats-${param("stream")}-${index + 1}.json`
        : `amqp-${param("queue")}-p-${index}.json`)
  )
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
    expect(kafka.stderr).toContain("redis://")
    expect(kafka.stderr).toContain("mqtt://")
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
      "random SIGKILLs during a drain, then one more run, end in that same state (poison by design aside) with nothing unacknowledged",
      async () => {
        await using dir = await tempDir()
        const bodies = await generated(dir.path, 200, 7)
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
              String(killBatch),
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
          // A killed consumer's deliveries come back: at once on RabbitMQ and to Redis's same consumer, after ack_wait on JetStream.
          await Bun.sleep(1200)
        }
        const last = await consumeSource(q.root, b.url)
        expect(last.exitCode, last.stderr).toBe(0)
        expect(kills).toBeGreaterThan(0)
        const actual = nameFree(q.root, snapshot(q.root))
        // A delivery in hand, alone, at a kill that followed its last counted attempt is poison by
        // design (as a file is): the state to reach is then that of the files dropped into inbox/
        // where exactly those crash every consumer.
        const expected = await droppedAsFiles(dir.path, poisonedByKills(q.root, dir.path, kills))
        if ("isIdentityTheBody" in broker) expect(distinct(actual)).toEqual(distinct(expected))
        else expect(actual).toEqual(expected)
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
        if ("isIdentityTheBody" in broker) expect(distinct(actual)).toEqual(distinct(expected))
        else expect(actual).toEqual(expected)
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
        // Stopped once it is under way, however fast the machine: a first batch in done/.
        const until = Date.now() + 30_000
        while (Date.now() < until && fs.readdirSync(join(q.root, "done")).length === 0) await Bun.sleep(20)
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
        // Not --quiet: the run's summary line says what it recognised.
        const again = await spool("consume", ["--root", q.root, "--source", b.url, "--idle-wait", "3s"])
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
        const landed = landedAs(broker.name, b, 1, good(1))
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

for (const broker of brokers)
  describe(`consume --source on ${broker.name}, after kills with a batch in hand`, () => {
    const body = (i: number) =>
      new TextEncoder().encode(`{"msg_id":"k-${i}","order_no":"K","seq":${i + 1},"amount":1.00}`)
    /** Publishes `count` messages and kills two consumers with all of them landed under tmp/, unread. */
    async function killedTwice(b: Broker, root: string, count: number): Promise<void> {
      await b.publish(Array.from({ length: count }, (_, i) => body(i)))
      for (let kill = 0; kill < 2; kill++) {
        const killed = await consumeSource(root, b.url, [], { SPOOL_FAULT: "after-land-write" })
        expect(killed.exitCode, killed.stderr).toBe(137)
        // A killed consumer's deliveries come back: at once on RabbitMQ, after the lease on Redis, after ack_wait on JetStream.
        await Bun.sleep(1200)
      }
    }

    /** After killedTwice: a run that `killing` kills (SPOOL_FAULT or SPOOL_CRASH_ON), then one with `after` that drains. */
    async function killedOnceMore(
      b: Broker,
      root: string,
      killing: Record<string, string>,
      after?: Record<string, string>,
    ) {
      const killed = await consumeSource(root, b.url, [], killing)
      expect(killed.exitCode, killed.stderr).toBe(137)
      await Bun.sleep(1200)
      const r = await consumeSource(root, b.url, [], after)
      expect(r.exitCode, r.stderr).toBe(0)
    }

    broker.it(
      `every message of the batch is processed${broker.counts ? ", each one its count has reached --max-attempts taken alone" : " (the broker keeps no count)"}`,
      async () => {
        await using b = await broker.open()
        await using q = await tempQueue()
        await killedTwice(b, q.root, 20)
        await b.publish([body(20), body(21)])
        // Not --quiet: the log says which deliveries were taken alone.
        const r = await spool("consume", ["--root", q.root, "--source", b.url])
        expect(r.exitCode, r.stderr).toBe(0)
        const s = snapshot(q.root)
        expect(s.failures).toEqual([])
        const processed = (s.processed as { msg_id: string }[]).map((row) => row.msg_id).sort()
        expect(processed).toEqual(Array.from({ length: 22 }, (_, i) => `k-${i}`).sort())
        const alone = r.stderr.split("\n").filter((line) => line.includes("taken-alone"))
        // JetStream hands a dead consumer's deliveries out again as pulls ask, so the second kill
        // may hold only some of them: only those come a third time.
        if (broker.name === "NATS JetStream") expect(alone.length).toBeGreaterThan(0)
        else expect(alone).toHaveLength(broker.counts ? 20 : 0)
        expect(fs.readdirSync(join(q.root, "tmp")).filter((n) => n.endsWith(".land"))).toEqual([])
        expect(await b.unacked()).toBe(0)
      },
      90_000,
    )

    if (broker.counts)
      broker.it(
        "one of them that then crashes the consumer alone is poison, unread next time, and its batch-mates flow",
        async () => {
          await using b = await broker.open()
          await using q = await tempQueue()
          await killedTwice(b, q.root, 3)
          // The first message: on every broker among the deliveries held at both kills.
          const landed = landedAs(broker.name, b, 0, body(0))
          const env = { SPOOL_CRASH_ON: landed }
          await killedOnceMore(b, q.root, env, env)
          const s = snapshot(q.root)
          expect(s.failures).toEqual([{ file: landed, original: landed, reason: "poison" }])
          using db = new Database(join(q.root, "ledger.db"), { readonly: true })
          expect(db.query("SELECT detail FROM failures").all()).toEqual([
            { detail: "no commit in 3 attempts; the consumer died with it alone in hand on the last" },
          ])
          expect((s.processed as { msg_id: string }[]).map((row) => row.msg_id).sort()).toEqual(["k-1", "k-2"])
          expect(await b.unacked()).toBe(0)
        },
        90_000,
      )

    if (broker.counts)
      broker.it(
        "a kill while one taken alone waits for the validator, before its attempt counts, costs it nothing",
        async () => {
          await using b = await broker.open()
          await using q = await tempQueue()
          await killedTwice(b, q.root, 3)
          await killedOnceMore(b, q.root, { SPOOL_FAULT: "before-attempt" })
          const s = snapshot(q.root)
          expect(s.failures).toEqual([])
          expect((s.processed as { msg_id: string }[]).map((row) => row.msg_id).sort()).toEqual(["k-0", "k-1", "k-2"])
          expect(await b.unacked()).toBe(0)
        },
        90_000,
      )
  })

describe("consume --source with a PostgreSQL ledger, after kills with a batch in hand", () => {
  const body = (i: number) => `{"msg_id":"k-${i}","order_no":"K","seq":${i + 1},"amount":1.00}`
  ;(pgSkip === undefined ? rabbit : it.skip)(
    "a commit that fails cleanly with a delivery taken alone hands it back uncounted: the next run processes it",
    async () => {
      await using db = await tempDatabase()
      await using b = await tempAmqpQueue("quorum")
      await using q = await tempQueue()
      await b.publish(...[0, 1, 2].map((i) => ({ body: body(i), id: `p-${i}` })))
      const run = (more: readonly string[], env?: Record<string, string>) =>
        consumeSource(q.root, b.url, ["--ledger", db.url, ...more], env)
      for (let kill = 0; kill < 2; kill++)
        expect((await run([], { SPOOL_FAULT: "after-land-write" })).exitCode).toBe(137)
      // Counted three times now: the first is taken alone, and its commit waits for this lock until it gives up.
      const locker = new SQL({ url: db.url, max: 1 })
      const held = await locker.reserve()
      try {
        await held`BEGIN`
        await held`LOCK TABLE processed IN SHARE MODE`
        const failed = await run(["--busy-timeout", "1s"])
        expect(failed.exitCode, failed.stderr).toBe(3)
        await held`ROLLBACK`
      } finally {
        held.release()
        await locker.close()
      }
      const r = await run([])
      expect(r.exitCode, r.stderr).toBe(0)
      const sql = new SQL({ url: db.url, max: 1 })
      try {
        expect(await sql`SELECT file, reason FROM failures`).toEqual([])
        const processed = await sql`SELECT msg_id FROM processed ORDER BY msg_id`
        expect(processed.map((row: { msg_id: string }) => row.msg_id)).toEqual(["k-0", "k-1", "k-2"])
      } finally {
        await sql.close()
      }
      expect(fs.readdirSync(join(q.root, "done"))).toHaveLength(3)
      expect(await b.ready()).toBe(0)
    },
    90_000,
  )
})
