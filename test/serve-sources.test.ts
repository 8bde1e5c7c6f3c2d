// Each broker source's backlog on the console's overview, against the machine's RabbitMQ, NATS
// JetStream and Redis, each test on a queue or stream of its own, removed afterwards: messages
// published, some consumed by the real consume --source, some delivered to another client and
// not acknowledged; the overview (page, JSON and /metrics) must show what the broker itself says
// is left. MQTT cannot be asked, and a broker that does not answer must not fail the page.
import { describe, expect, it } from "bun:test"
import type { Overview } from "@spool/serve"
import { requireServer, spool, tempAmqpQueue, tempJetStream, tempQueue, tempRedisStream } from "@spool/test-support"
import { startServe } from "./serve-queue.ts"

const rabbit = await requireServer("RabbitMQ", "127.0.0.1", 5672, "rabbitmq-server")
const nats = await requireServer("NATS", "127.0.0.1", 4222, "nats-server -js -a 127.0.0.1 -p 4222")
const redis = await requireServer("Redis", "127.0.0.1", 6379, "redis-server --daemonize yes --save ''")

/** `count` valid messages numbered from `from`. */
const messages = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) =>
    JSON.stringify({ msg_id: `m-${from + i}`, order_no: "O", seq: from + i, amount: 1 }),
  )

/** Drains the source into the root with the real consume, as an operator runs it. */
async function consumeFrom(root: string, url: string): Promise<void> {
  const r = await spool("consume", ["--root", root, "--source", url, "--quiet"])
  expect(r.stderr).toBe("")
  expect(r.exitCode).toBe(0)
}

/** What the running console says of `source`: the JSON, the page's row and the /metrics lines. */
async function shown(url: string, source: string) {
  const overview = (await (await fetch(new URL("/api/overview", url))).json()) as Overview
  const res = await fetch(url)
  const page = await res.text()
  const metrics = await (await fetch(new URL("/metrics", url))).text()
  const row = page.split('<tr class="source">').find((r) => r.startsWith(`<td>${source.replaceAll("&", "&amp;")}</td>`))
  const sample = (name: string) =>
    new RegExp(
      `^${name}\\{root="[^"]*",source="${source.replace(/[?.*+^$()[\]{}|\\]/g, "\\$&")}"\\} (\\S+)$`,
      "m",
    ).exec(metrics)?.[1]
  return {
    status: res.status,
    backlog: overview.sources.find((s) => s.source === source)?.backlog,
    row,
    metrics: {
      up: sample("spool_source_up"),
      waiting: sample("spool_source_waiting"),
      unacked: sample("spool_source_unacked"),
    },
  }
}

describe("the overview's broker sources", () => {
  rabbit(
    "shows a RabbitMQ queue's ready messages as the broker counts them, given the URL with its password",
    async () => {
      await using q = await tempQueue()
      await using b = await tempAmqpQueue()
      await b.publish(...messages(1, 6).map((body, i) => ({ body, id: `a-${i}` })))
      await consumeFrom(q.root, b.url)
      await b.publish(...messages(7, 4).map((body, i) => ({ body, id: `b-${i}` })))
      const described = b.url.replace("guest:guest@", "guest@")
      await using served = await startServe(q.root, ["--source", b.url])
      const s = await shown(served.url, described)
      const ready = await b.ready()
      expect(ready).toBe(4)
      expect(s.backlog).toMatchObject({ state: "read", waiting: ready })
      expect(s.backlog?.state === "read" && s.backlog.unacked).toBeUndefined()
      expect(s.row).toContain(`data-source-waiting>${ready}<`)
      expect(s.metrics).toEqual({ up: "1", waiting: String(ready), unacked: undefined })
    },
  )

  rabbit("says how to give the password when the ledger's URL, without it, is refused", async () => {
    await using q = await tempQueue()
    await using b = await tempAmqpQueue()
    await b.publish(...messages(1, 2).map((body, i) => ({ body, id: `a-${i}` })))
    await consumeFrom(q.root, b.url)
    await using served = await startServe(q.root)
    const s = await shown(served.url, b.url.replace("guest:guest@", "guest@"))
    expect(s.status).toBe(200)
    expect(s.backlog?.state).toBe("unreachable")
    expect(s.row).toContain("unreachable: ")
    expect(s.row).toContain("give spool serve --source with it")
    expect(s.metrics.up).toBe("0")
  })

  nats("shows a JetStream consumer's num_pending and num_ack_pending as the server reports them", async () => {
    await using q = await tempQueue()
    await using b = await tempJetStream(60_000)
    await b.publish(...messages(1, 6))
    await consumeFrom(q.root, b.url)
    await b.publish(...messages(7, 5))
    // Another client takes two and holds them unacknowledged: they are the consumer's ack pending.
    expect(await b.holdUnacked(2)).toBe(2)
    await using served = await startServe(q.root)
    const s = await shown(served.url, b.url)
    const { ackPending } = await b.counts()
    const unacked = await b.unacked()
    expect([ackPending, unacked]).toEqual([2, 5])
    expect(s.backlog).toMatchObject({ state: "read", waiting: unacked - ackPending, unacked: ackPending })
    expect(s.row).toContain("data-source-waiting>3<")
    expect(s.row).toContain("data-source-unacked>2<")
    expect(s.metrics).toEqual({ up: "1", waiting: "3", unacked: "2" })
  })

  redis("shows a Redis group's lag and pending as XINFO GROUPS gives them", async () => {
    await using q = await tempQueue()
    await using b = await tempRedisStream(30_000)
    await b.publish(...messages(1, 6))
    await consumeFrom(q.root, b.url)
    await b.publish(...messages(7, 4))
    await b.client.call("XREADGROUP", "GROUP", b.group, "another", "COUNT", "1", "STREAMS", b.stream, ">")
    const described = b.url.replace(/&lease=\d+$/, "")
    await using served = await startServe(q.root)
    const s = await shown(served.url, described)
    const pending = (await b.pending()).length
    const unacked = await b.unacked()
    expect([pending, unacked]).toEqual([1, 4])
    expect(s.backlog).toMatchObject({ state: "read", waiting: unacked - pending, unacked: pending })
    expect(s.metrics).toEqual({ up: "1", waiting: "3", unacked: "1" })
  })

  it("says MQTT cannot be asked, and a broker that does not answer is unreachable, the page still whole", async () => {
    await using q = await tempQueue()
    const mqtt = "mqtt://127.0.0.1:1883/?topic=orders&client=spool-serve-test"
    // Port 9 (discard) on the loopback address: nothing listens, the connection is refused at once.
    const closed = "redis://127.0.0.1:9/?stream=orders&group=spool"
    await using served = await startServe(q.root, ["--source", mqtt, "--source", closed])
    const m = await shown(served.url, mqtt)
    expect(m.status).toBe(200)
    expect(m.backlog).toEqual({
      state: "not-available",
      reason: "MQTT has no way to ask the broker how many messages a session holds",
    })
    expect(m.row).toContain("not available")
    const r = await shown(served.url, closed)
    expect(r.backlog?.state).toBe("unreachable")
    expect(r.row).toMatch(/unreachable: \S/)
    expect([m.metrics.up, r.metrics.up]).toEqual(["0", "0"])
  })

  it("refuses a --source it cannot read with exit 2", async () => {
    await using q = await tempQueue()
    const r = await Bun.spawn(
      ["bun", "../packages/spool/bin/spool.ts", "serve", "--root", q.root, "--source", "amqp://host/"],
      {
        cwd: import.meta.dir,
        stdout: "pipe",
        stderr: "pipe",
      },
    )
    const [stdout, stderr, code] = await Promise.all([
      new Response(r.stdout).text(),
      new Response(r.stderr).text(),
      r.exited,
    ])
    expect(stdout).toBe("")
    expect(stderr).toContain("names no queue")
    expect(code).toBe(2)
  })
})
