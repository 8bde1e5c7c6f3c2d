// What a --source run does with what it cannot simply take. One that fails cleanly (exit 3: here
// the SQLite ledger locked past --busy-timeout) with deliveries landed and not committed leaves
// them in processing/ under their claims, as a crash would: their home is the broker, which
// delivers them again, so a copy handed back into inbox/ would be consumed a second time by a
// later run over the directory; the next run's recovery processes them from their landed files
// and recognises the broker's redeliveries. A --watch consumer takes over what a consumer killed
// beside it left. A delivery over --max-bytes goes to error/ unread, as such a file does. A
// delivery two processes were both given is committed by one and recognised by the other.
import { Database } from "bun:sqlite"
import { expect } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  isStopped,
  requireServer,
  snapshot,
  spawnConsume,
  tempAmqpQueue,
  tempQueue,
  tempRedisStream,
} from "@spool/test-support"

const rabbit = await requireServer("RabbitMQ", "127.0.0.1", 5672, "rabbitmq-server")
const redis = await requireServer("Redis", "127.0.0.1", 6379, "redis-server --daemonize yes --save ''")

const consume = (root: string, url: string, more: readonly string[], env: Record<string, string> = {}) =>
  spawnConsume(["--root", root, "--source", url, ...more], env)

rabbit(
  "a --watch run stops with exit 2, moving nothing out of the root, once done/ is replaced by a link while it runs",
  async () => {
    await using amqp = await tempAmqpQueue()
    await using q = await tempQueue()
    const outside = join(q.path, "outside")
    fs.mkdirSync(outside)
    const body = (i: number) => JSON.stringify({ msg_id: `w-${i}`, order_no: "W", seq: i + 1, amount: 1 })
    await amqp.publish({ body: body(0), id: "w-0" })
    const run = consume(q.root, amqp.url, ["--watch"])
    try {
      for (const deadline = Date.now() + 30_000; fs.readdirSync(join(q.root, "done")).length === 0; await Bun.sleep(20))
        if (Date.now() > deadline) throw new Error("the first delivery never reached done/")
      fs.renameSync(join(q.root, "done"), join(q.path, "done-before"))
      fs.symlinkSync(outside, join(q.root, "done"))
      await amqp.publish({ body: body(1), id: "w-1" })
      const [stderr, code] = await Promise.all([new Response(run.stderr).text(), run.exited])
      expect(stderr).toContain(`${q.root} changed under this run: done/ is a symbolic link now`)
      expect(code).toBe(2)
      expect(fs.readdirSync(outside)).toEqual([])
    } finally {
      run.kill("SIGKILL")
    }
  },
)

rabbit(
  "deliveries landed when the commit fails cleanly wait in processing/, not inbox/, and the next run finishes them",
  async () => {
    await using amqp = await tempAmqpQueue()
    const body = (i: number) => JSON.stringify({ msg_id: `f-${i}`, order_no: "F", seq: i + 1, amount: 1 })
    await amqp.publish(...[0, 1, 2].map((i) => ({ body: body(i), id: `p-${i}` })))
    await using q = await tempQueue()
    // Stopped once the batch is landed in processing/ under its claims, nothing committed.
    const a = consume(q.root, amqp.url, ["--busy-timeout", "1s"], {
      SPOOL_FAULT: "after-claim",
      SPOOL_FAULT_SIGNAL: "SIGSTOP",
    })
    const holder = new Database(join(q.root, "ledger.db"))
    try {
      for (const deadline = Date.now() + 30_000; !isStopped(a.pid); await Bun.sleep(10))
        if (a.exitCode !== null || Date.now() > deadline) throw new Error("the consumer never stopped")
      expect(fs.readdirSync(join(q.root, "processing"))).toHaveLength(3)
      holder.exec("PRAGMA busy_timeout = 20000")
      holder.exec("BEGIN IMMEDIATE")
      a.kill("SIGCONT")
      const [stderr, code] = await Promise.all([new Response(a.stderr).text(), a.exited])
      expect(code, stderr).toBe(3)
      expect(stderr).toContain("--busy-timeout")
      expect(stderr).toContain(`nothing is lost: 3 files of this run wait in ${join(q.root, "processing")}/`)
    } finally {
      a.kill("SIGCONT")
      a.kill("SIGKILL")
      if (holder.inTransaction) holder.exec("ROLLBACK")
      holder.close()
    }
    expect(fs.readdirSync(join(q.root, "inbox"))).toEqual([])
    expect(fs.readdirSync(join(q.root, "processing")).sort()).toEqual(
      [0, 1, 2].map((i) => `amqp-${amqp.name}-p-${i}.json`),
    )
    const b = consume(q.root, amqp.url, ["--log-format", "json"])
    const [stderr, code] = await Promise.all([new Response(b.stderr).text(), b.exited])
    expect(code, stderr).toBe(0)
    expect(stderr).toContain('"redelivered":3')
    const s = snapshot(q.root)
    expect((s.processed as { msg_id: string }[]).map((r) => r.msg_id).sort()).toEqual(["f-0", "f-1", "f-2"])
    expect(s.duplicates).toEqual([])
    expect(s.claims).toEqual([])
    expect(Object.keys(s.done).sort()).toEqual([0, 1, 2].map((i) => `amqp-${amqp.name}-p-${i}.json`))
    expect(fs.readdirSync(join(q.root, "inbox"))).toEqual([])
    expect(await amqp.ready()).toBe(0)
  },
  60_000,
)

rabbit(
  "a --watch consumer takes over what a consumer that died beside it landed, instead of handing it back for good",
  async () => {
    await using amqp = await tempAmqpQueue()
    await using q = await tempQueue()
    const n = 200
    const body = (i: number) => JSON.stringify({ msg_id: `w-${i}`, order_no: "W", seq: i + 1, amount: 1 })
    // The survivor runs first: its start-up recovery has nothing to take.
    const survivor = consume(q.root, amqp.url, ["--watch", "--batch-size", "20"])
    const stderr = new Response(survivor.stderr).text()
    try {
      await untilLogged(q.root, amqp.url)
      // The other lands its first batch and dies with it: its claims hold those names.
      const dying = consume(q.root, amqp.url, ["--batch-size", "20"], { SPOOL_FAULT: "after-claim" })
      await Bun.sleep(500)
      await amqp.publish(...Array.from({ length: n }, (_, i) => ({ body: body(i), id: `p-${i}` })))
      expect(await dying.exited).toBe(137)
      const done = join(q.root, "done")
      for (const deadline = Date.now() + 45_000; fs.readdirSync(done).length < n; await Bun.sleep(50))
        if (Date.now() > deadline) throw new Error(`${fs.readdirSync(done).length} of ${n} done after 45 s`)
      survivor.kill("SIGTERM")
      expect(await survivor.exited, await stderr).toBe(0)
    } finally {
      survivor.kill("SIGKILL")
    }
    const s = snapshot(q.root)
    expect(s.processed).toHaveLength(n)
    expect(s.duplicates).toEqual([])
    expect(s.claims).toEqual([])
    expect(fs.readdirSync(join(q.root, "processing"))).toEqual([])
    expect(await amqp.ready()).toBe(0)
  },
  90_000,
)

/** Waits until a consumer of `url` on `root` is connected: its consumers row is in the ledger. */
async function untilLogged(root: string, _url: string): Promise<void> {
  for (const deadline = Date.now() + 30_000; ; await Bun.sleep(20)) {
    if (Date.now() > deadline) throw new Error("the consumer never registered")
    if (!fs.existsSync(join(root, "ledger.db"))) continue
    const db = new Database(join(root, "ledger.db"), { readonly: true })
    try {
      if ((db.query("SELECT count(*) AS n FROM consumers").get() as { n: number }).n > 0) return
    } catch {
    } finally {
      db.close()
    }
  }
}

rabbit("a delivery over --max-bytes goes to error/ as too-large, unread, as a file of its size would", async () => {
  await using amqp = await tempAmqpQueue()
  await using q = await tempQueue()
  const big = JSON.stringify({ msg_id: "big", order_no: "B", seq: 1, amount: 1, pad: "x".repeat(500) })
  const small = JSON.stringify({ msg_id: "small", order_no: "B", seq: 2, amount: 1 })
  await amqp.publish({ body: big, id: "p-big" }, { body: small, id: "p-small" })
  const r = consume(q.root, amqp.url, ["--max-bytes", "200"])
  expect(await r.exited, await new Response(r.stderr).text()).toBe(0)
  const s = snapshot(q.root)
  expect((s.processed as { msg_id: string }[]).map((p) => p.msg_id)).toEqual(["small"])
  expect(s.failures).toMatchObject([{ file: `amqp-${amqp.name}-p-big.json`, reason: "too-large" }])
  using db = new Database(join(q.root, "ledger.db"), { readonly: true })
  expect(db.query("SELECT detail, payload_hash FROM failures").all()).toEqual([
    { detail: `${big.length} bytes, over the 200-byte limit`, payload_hash: null },
  ])
  expect(fs.readFileSync(join(q.root, "error", `amqp-${amqp.name}-p-big.json`), "utf8")).toBe(big)
  expect(await amqp.ready()).toBe(0)
})

redis(
  "a pending entry two processes of one consumer name both read is committed once, the other acknowledging it",
  async () => {
    await using stream = await tempRedisStream()
    await using q = await tempQueue()
    const body = JSON.stringify({ msg_id: "r-1", order_no: "R", seq: 1, amount: 1 })
    const [id] = await stream.publish(body)
    const url = `${stream.url}&consumer=shared`
    // Read once and never acknowledged: pending with the consumer name both processes share.
    await stream.client.call(
      "XREADGROUP",
      "GROUP",
      stream.group,
      "shared",
      "COUNT",
      "10",
      "STREAMS",
      stream.stream,
      ">",
    )
    // One reads it from the pending list and stops before it claims it...
    const late = consume(q.root, url, ["--log-format", "json"], {
      SPOOL_FAULT: "before-land-claim",
      SPOOL_FAULT_SIGNAL: "SIGSTOP",
    })
    try {
      for (const deadline = Date.now() + 30_000; !isStopped(late.pid); await Bun.sleep(10))
        if (late.exitCode !== null || Date.now() > deadline) throw new Error("the consumer never stopped")
      // ...while the other reads the same entry, commits and acknowledges it, and ends.
      const first = consume(q.root, url, [])
      expect(await first.exited, await new Response(first.stderr).text()).toBe(0)
      late.kill("SIGCONT")
      const [stderr, code] = await Promise.all([new Response(late.stderr).text(), late.exited])
      expect(code, stderr).toBe(0)
      expect(stderr).toContain('"redelivered":1')
    } finally {
      late.kill("SIGCONT")
      late.kill("SIGKILL")
    }
    const s = snapshot(q.root)
    expect((s.processed as { msg_id: string }[]).map((p) => p.msg_id)).toEqual(["r-1"])
    expect(s.duplicates).toEqual([])
    expect(Object.keys(s.done)).toEqual([`redis-${stream.stream}-${id}.json`])
    expect(await stream.unacked()).toBe(0)
  },
  60_000,
)
