// replay of a file a broker delivered, against the machine's RabbitMQ, NATS JetStream, Redis and
// Mosquitto, each test on a queue, stream or topic of its own: published back to its origin with --source (the file
// leaves error/ only once the broker confirmed), consumed once from there, or put into inbox/
// with --to inbox; without --source, or with the origin gone, nothing changes.
import { describe, expect } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  repoRoot,
  requireServer,
  run,
  spool,
  tempAmqpQueue,
  tempJetStream,
  tempMqttTopic,
  tempQueue,
  tempRedisStream,
} from "@spool/test-support"

const rabbit = await requireServer("RabbitMQ", "127.0.0.1", 5672, "rabbitmq-server")
const nats = await requireServer("NATS", "127.0.0.1", 4222, "nats-server -js -a 127.0.0.1 -p 4222")
const mosquitto = await requireServer("Mosquitto", "127.0.0.1", 1883, "mosquitto -d -c /etc/mosquitto/mosquitto.conf")
const redis = await requireServer("Redis", "127.0.0.1", 6379, "redis-server --daemonize yes --save ''")

interface Broker extends AsyncDisposable {
  readonly url: string
  publish(body: string): Promise<void>
  unacked(): Promise<number>
  /** Removes the queue or stream, as an operator may while files of it wait in error/. */
  remove(): Promise<void>
}

const brokers = [
  {
    name: "RabbitMQ",
    it: rabbit,
    password: "guest:PASSWORD@",
    async open(): Promise<Broker> {
      const q = await tempAmqpQueue()
      let n = 0
      return {
        url: q.url,
        publish: (body) => q.publish({ body, id: `p-${n++}` }),
        unacked: () => q.ready(),
        remove: async () => {
          await q[Symbol.asyncDispose]()
        },
        [Symbol.asyncDispose]: async () => {
          // The queue may be gone already (the case that removes it).
          await Promise.resolve(q[Symbol.asyncDispose]()).catch(() => {})
        },
      }
    },
  },
  {
    name: "NATS JetStream",
    it: nats,
    password: undefined,
    async open(): Promise<Broker> {
      const s = await tempJetStream(1000)
      return {
        url: s.url,
        publish: (body) => s.publish(body),
        unacked: () => s.unacked(),
        remove: async () => {
          await s[Symbol.asyncDispose]()
        },
        [Symbol.asyncDispose]: () => s[Symbol.asyncDispose](),
      }
    },
  },
  {
    name: "Redis Streams",
    it: redis,
    password: undefined,
    async open(): Promise<Broker> {
      const s = await tempRedisStream(1000)
      let isRemoved = false
      return {
        url: s.url,
        publish: async (body) => void (await s.publish(body)),
        unacked: () => s.unacked(),
        remove: async () => {
          isRemoved = true
          await s[Symbol.asyncDispose]()
        },
        [Symbol.asyncDispose]: async () => {
          if (!isRemoved) await s[Symbol.asyncDispose]()
        },
      }
    },
  },
  {
    name: "MQTT",
    it: mosquitto,
    password: undefined,
    async open(): Promise<Broker> {
      const t = await tempMqttTopic()
      return {
        url: t.url(),
        publish: (body) => t.publish([body]),
        unacked: () => t.unacked(),
        // The consumer's session ended: nothing subscribes to the topic any more.
        remove: async () => {
          await t[Symbol.asyncDispose]()
        },
        [Symbol.asyncDispose]: () => t[Symbol.asyncDispose](),
      }
    },
  },
] as const

const bad = '{"msg_id": "r-1", "order_no": "A-1", "seq": 1, "amount": '
const fixed = '{"msg_id": "r-1", "order_no": "A-1", "seq": 1, "amount": 5.5}'

// The three entry points share one implementation; each case goes through a different one.
const replay = {
  spool: (args: readonly string[], env?: Record<string, string>) =>
    run(["bun", join(repoRoot, "packages/spool/bin/spool.ts"), "replay", ...args], env ? { env } : {}),
  script: (args: readonly string[]) => run(["bun", join(repoRoot, "scripts/replay.ts"), ...args]),
  sh: (args: readonly string[]) => run([join(repoRoot, "packages/ops/dist/replay.sh"), ...args]),
}

/** An operator's command, through the spool entry point. */
const operator = (name: "show" | "list" | "stats", args: readonly string[]) =>
  run(["bun", join(repoRoot, "packages/spool/bin/spool.ts"), name, ...args])

const consume = (root: string, url: string) => spool("consume", ["--root", root, "--source", url, "--quiet"])
const list = (root: string, dir: string) => fs.readdirSync(join(root, dir)).sort()

/** Consumes one bad body from `b` into error/ and returns its landed name. */
async function failOne(root: string, b: Broker): Promise<string> {
  await b.publish(bad)
  const r = await consume(root, b.url)
  expect(r.exitCode, r.stderr).toBe(0)
  const [name, ...more] = list(root, "error")
  expect(more).toEqual([])
  return name as string
}

for (const broker of brokers)
  describe(`replay of a delivery from ${broker.name}`, () => {
    broker.it(
      "publishes it back to its origin with --source, and the next consume processes it once",
      async () => {
        await using b = await broker.open()
        await using q = await tempQueue()
        const name = await failOne(q.root, b)
        // The operator's commands read a broker's root as a file queue's; show names the origin.
        const shown = await operator("show", ["--root", q.root, name])
        expect(shown.exitCode, shown.stderr).toBe(0)
        expect(shown.stdout).toContain(`file ${name}: in error/`)
        expect(shown.stdout).toMatch(/\norigin [a-z]+:\/\/\S+ /)
        if (broker.password !== undefined) expect(shown.stdout).not.toContain(broker.password)
        const json = JSON.parse((await operator("show", ["--root", q.root, "--json", name])).stdout)
        expect(json.origin.address).toBeString()
        expect((await operator("list", ["--root", q.root, "error"])).stdout).toContain(name)
        const stats = JSON.parse((await operator("stats", ["--root", q.root, "--json"])).stdout)
        expect(JSON.stringify(stats.openFailures)).toContain("parse")
        // Without --source: says what to pass, changes nothing.
        const missing = await replay.script(["--root", q.root, name])
        expect(missing.exitCode).toBe(1)
        expect(missing.stderr).toContain("--source '")
        expect(missing.stderr).toContain("--to inbox")
        if (broker.password !== undefined) expect(missing.stderr).toContain(broker.password)
        expect(list(q.root, "error")).toEqual([name])
        expect(await b.unacked()).toBe(0)
        // Corrected in place, then published back.
        fs.writeFileSync(join(q.root, "error", name), fixed)
        const dry = await replay.sh(["--root", q.root, "--dry-run", "--source", b.url, name])
        expect(dry.exitCode, dry.stderr).toBe(0)
        expect(dry.stderr).toContain("would be published back to")
        expect(dry.stderr).toContain("1 of 1 selected file would move back to their broker (1) or inbox/")
        expect(list(q.root, "error")).toEqual([name])
        const r = await replay.spool(["--root", q.root, "--source", b.url, name])
        expect(r.exitCode, r.stderr).toBe(0)
        expect(r.stderr).toContain("published")
        expect(r.stderr).not.toContain(":guest@")
        expect(list(q.root, "error")).toEqual([])
        expect(list(q.root, "inbox")).toEqual([])
        const again = await consume(q.root, b.url)
        expect(again.exitCode, again.stderr).toBe(0)
        expect(list(q.root, "done")).toHaveLength(1)
        expect(list(q.root, "error")).toEqual([])
        expect(await b.unacked()).toBe(0)
        // A further drain finds nothing new.
        expect((await consume(q.root, b.url)).exitCode).toBe(0)
        expect(list(q.root, "done")).toHaveLength(1)
      },
      60_000,
    )

    broker.it(
      "killed between the broker's confirm and the file's removal, then replayed again, it is processed once",
      async () => {
        await using b = await broker.open()
        await using q = await tempQueue()
        const name = await failOne(q.root, b)
        fs.writeFileSync(join(q.root, "error", name), fixed)
        const killed = await replay.spool(["--root", q.root, "--source", b.url, name], { SPOOL_FAULT: "after-publish" })
        expect(killed.exitCode).not.toBe(0)
        expect(list(q.root, "error")).toEqual([name])
        const again = await replay.spool(["--root", q.root, "--source", b.url, name])
        expect(again.exitCode, again.stderr).toBe(0)
        expect(list(q.root, "error")).toEqual([])
        const r = await spool("consume", ["--root", q.root, "--source", b.url])
        expect(r.exitCode, r.stderr).toBe(0)
        expect(list(q.root, "done")).toHaveLength(1)
        expect(list(q.root, "error")).toEqual([])
        expect(fs.readFileSync(join(q.root, "dup.txt"), "utf8").trim()).toBe("")
        expect(await b.unacked()).toBe(0)
      },
      90_000,
    )

    broker.it(
      "replayed unchanged, it is consumed again, not taken for a redelivery of its failure, and fails again",
      async () => {
        await using b = await broker.open()
        await using q = await tempQueue()
        const name = await failOne(q.root, b)
        const r = await replay.spool(["--root", q.root, "--source", b.url, name])
        expect(r.exitCode, r.stderr).toBe(0)
        expect(r.stderr).toContain("warning")
        expect(list(q.root, "error")).toEqual([])
        expect((await consume(q.root, b.url)).exitCode).toBe(0)
        const [again, ...more] = list(q.root, "error")
        expect(more).toEqual([])
        expect(again).not.toBe(name)
        expect(fs.readFileSync(join(q.root, "error", again as string), "utf8")).toBe(bad)
        expect(await b.unacked()).toBe(0)
      },
      90_000,
    )

    broker.it(
      "a selection publishes each file back, and skips the unchanged ones unless told to take them",
      async () => {
        await using b = await broker.open()
        await using q = await tempQueue()
        await b.publish(bad)
        await b.publish(`${bad}6`)
        expect((await consume(q.root, b.url)).exitCode).toBe(0)
        const failed = list(q.root, "error")
        expect(failed).toHaveLength(2)
        const skipped = await replay.script(["--root", q.root, "--source", b.url, "--all"])
        expect(skipped.exitCode, skipped.stderr).toBe(0)
        expect(skipped.stderr).toContain("skipped 2 of 2")
        expect(list(q.root, "error")).toEqual(failed)
        const r = await replay.sh(["--root", q.root, "--source", b.url, "--all", "--include-unchanged"])
        expect(r.exitCode, r.stderr).toBe(0)
        expect(r.stdout.trim().split("\n").sort()).toEqual(failed)
        expect(r.stderr).toContain("their broker (2)")
        expect(list(q.root, "error")).toEqual([])
        expect((await consume(q.root, b.url)).exitCode).toBe(0)
        const again = list(q.root, "error")
        expect(again).toHaveLength(2)
        expect(again.filter((n) => failed.includes(n))).toEqual([])
        expect(await b.unacked()).toBe(0)
      },
      90_000,
    )

    broker.it(
      "refuses another --source, puts it into inbox/ with --to inbox, and leaves it in error/ when the origin is gone",
      async () => {
        await using b = await broker.open()
        await using q = await tempQueue()
        const first = await failOne(q.root, b)
        // Another queue or stream than the one it came from: refused, nothing changed.
        await using other = await broker.open()
        const elsewhere = await replay.spool(["--root", q.root, "--source", other.url, first])
        expect(elsewhere.exitCode).toBe(1)
        expect(elsewhere.stderr).toContain("it came from")
        expect(list(q.root, "error")).toEqual([first])
        expect(await other.unacked()).toBe(0)
        const toInbox = await replay.sh(["--root", q.root, "--to", "inbox", first])
        expect(toInbox.exitCode, toInbox.stderr).toBe(0)
        expect(list(q.root, "inbox")).toEqual([first])
        expect(list(q.root, "error")).toEqual([])
        fs.rmSync(join(q.root, "inbox", first))
        await b.publish(bad)
        expect((await consume(q.root, b.url)).exitCode).toBe(0)
        const [second] = list(q.root, "error")
        await b.remove()
        const r = await replay.spool(["--root", q.root, "--source", b.url, second as string])
        expect(r.exitCode).not.toBe(0)
        // Opening the source finds its queue or stream gone, before anything is published; an MQTT
        // broker says at the publish that no subscription took it.
        expect(r.stderr).toMatch(/there is no queue|stream "[^"]+" does not exist|no subscription takes messages/)
        expect(list(q.root, "error")).toEqual([second as string])
      },
      90_000,
    )
  })
