// A batch whose effect takes longer than the JetStream consumer's ack_wait, with another
// consumer pulling from the same durable consumer meanwhile: keep-alives keep the batch in hand
// this consumer's, so the server never redelivers it, and no message is applied twice. On
// PostgreSQL the effect awaits, from the keeper thread and from the main thread's timer (a
// source without a keeper); on SQLite the handler holds the main thread, and only the keeper
// thread can keep the batch.
import { Database } from "bun:sqlite"
import { expect, it } from "bun:test"
import { join } from "node:path"
import { createPostgresConsumer, openSource, type SourcePort } from "@spool/core"
import {
  pgUnavailable,
  repoRoot,
  requireServer,
  run,
  tempDatabase,
  tempJetStream,
  tempQueue,
} from "@spool/test-support"

const nats = await requireServer("NATS", "127.0.0.1", 4222, "nats-server -js -a 127.0.0.1 -p 4222")
const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)
const pg = pgSkip ? it.skip : it
const both = nats === it ? pg : nats

const keptAlive = [
  ["from the keeper thread", "keeper"],
  ["from the main thread, for a source without a keeper", "none"],
  ["from the main thread, once the keeper thread failed to start", "broken"],
] as const

for (const [how, keeper] of keptAlive)
  both(
    `an effect outlasting ack_wait is not redelivered while in hand, with a second consumer pulling meanwhile (kept alive ${how})`,
    async () => {
      const ackWaitMs = 2000
      await using stream = await tempJetStream(ackWaitMs)
      const count = 12
      await stream.publish(
        ...Array.from({ length: count }, (_, i) =>
          JSON.stringify({ msg_id: `s-${i}`, order_no: "S", seq: i + 1, amount: 1 }),
        ),
      )
      await using q = await tempQueue()
      await using db = await tempDatabase()
      const calls = new Map<string, number>()
      const warnings: Record<string, unknown>[] = []
      const received: { id: string; deliveryCount: number | undefined }[] = []
      const sources: SourcePort[] = []
      // The sources are the test's: closed after the consumers that use them.
      await using _sources = {
        async [Symbol.asyncDispose]() {
          await Promise.all(sources.map((s) => s.close()))
        },
      }
      const open = async () =>
        createPostgresConsumer({
          root: q.root,
          ledger: db.url,
          source: await counting(stream.url, received, sources, keeper),
          logger: (level, msg, fields) => {
            if (level === "warn") warnings.push({ event: msg, ...fields })
          },
          batchSize: 3,
          idleWaitMs: 1000,
          setup: (sql) => sql`CREATE TABLE IF NOT EXISTS applied (msg_id TEXT PRIMARY KEY)`,
          handle: async (m, tx) => {
            calls.set(m.msg_id, (calls.get(m.msg_id) ?? 0) + 1)
            // The first batch lasts 6 s, three times the consumer's 2 s ack_wait; the rest are quick.
            if (m.seq <= 3) await Bun.sleep(2000)
            await tx`INSERT INTO applied VALUES (${m.msg_id})`
          },
        })
      await using first = await open()
      await using second = await open()
      const started = performance.now()
      const slow = first.drain()
      while (calls.size === 0) await Bun.sleep(10)
      // The second consumer pulls all along: whatever the server redelivered would come to it.
      const stop = new AbortController()
      const watching = second.watch(stop.signal)
      const a = await slow
      await Bun.sleep(ackWaitMs + 500)
      stop.abort()
      const b = await watching
      // The first consumer held its batch past ack_wait while the second took the rest.
      expect(performance.now() - started).toBeGreaterThan(ackWaitMs + 1000)
      expect(a.processed).toBeGreaterThan(0)
      expect(b.processed).toBeGreaterThan(0)
      expect(a.processed + b.processed).toBe(count)
      expect(a.duplicates + b.duplicates + a.redelivered + b.redelivered).toBe(0)
      expect([...calls.values()]).toEqual(Array(count).fill(1))
      // Every message came once, to one consumer: none was redelivered (its count would be 2).
      expect(received.map((d) => d.deliveryCount)).toEqual(Array(count).fill(1))
      expect(new Set(received.map((d) => d.id)).size).toBe(count)
      expect(await stream.unacked()).toBe(0)
      // A keeper thread that cannot start is said once per consumer, and changes nothing else.
      expect(warnings.map((w) => w.event)).toEqual(keeper === "broken" ? ["keeper-failed", "keeper-failed"] : [])
      const [rows] = await first.ledger.sql`SELECT
      (SELECT count(*)::int FROM processed) AS processed,
      (SELECT count(*)::int FROM duplicates) AS duplicates,
      (SELECT count(*)::int FROM applied) AS applied`
      expect(rows).toEqual({ processed: count, duplicates: 0, applied: count })
    },
    120_000,
  )

nats(
  "a synchronous handler outlasting ack_wait on the SQLite ledger is not redelivered while in hand",
  async () => {
    // Windows of seconds, not milliseconds: a loaded machine may leave the keeper thread unscheduled a while.
    const ackWaitMs = 3000
    await using stream = await tempJetStream(ackWaitMs)
    const count = 3
    await stream.publish(
      ...Array.from({ length: count }, (_, i) =>
        JSON.stringify({ msg_id: `b-${i}`, order_no: "B", seq: i + 1, amount: 1 }),
      ),
    )
    await using q = await tempQueue()
    // The first message holds the consumer's main thread for 2.5 ack_waits.
    const consuming = run(["bun", join(repoRoot, "test/apps/busy-handler.ts"), q.root], {
      env: { SOURCE: stream.url, BUSY_MS: "7500", BUSY_SEQ: "1" },
    })
    const deadline = Date.now() + 30_000
    while ((await stream.counts()).ackPending < count && Date.now() < deadline) await Bun.sleep(20)
    expect((await stream.counts()).ackPending).toBe(count)
    // Another consumer pulls while the batch is in hand: a redelivery would come to it.
    const stolen = await stream.pullAsAnother(count, 2500)
    const r = await consuming
    expect(stolen).toEqual([])
    expect(r.stderr).not.toContain("keeper-failed")
    expect(r.exitCode).toBe(0)
    const summary = JSON.parse(r.stdout) as Record<string, number>
    expect(summary).toMatchObject({ processed: count, duplicates: 0, redelivered: 0 })
    expect(await stream.counts()).toEqual({ ackPending: 0, redelivered: 0 })
    expect(await stream.unacked()).toBe(0)
    using db = new Database(join(q.root, "ledger.db"), { readonly: true })
    expect(db.query("SELECT count(*) AS n FROM processed").get()).toEqual({ n: count })
    expect(db.query("SELECT count(*) AS n FROM duplicates").get()).toEqual({ n: 0 })
    expect(db.query("SELECT count(DISTINCT msg_id) AS d, count(*) AS n FROM applied").get()).toEqual({
      d: count,
      n: count,
    })
    expect(db.query("SELECT count(*) AS n FROM claims").get()).toEqual({ n: 0 })
  },
  60_000,
)

/** A source of the stream that records every delivery it hands over, with its keeper or without. */
async function counting(
  url: string,
  received: { id: string; deliveryCount: number | undefined }[],
  sources: SourcePort[],
  keeper: "keeper" | "none" | "broken",
): Promise<SourcePort> {
  const port = await openSource(url)
  sources.push(port)
  return new Proxy(port, {
    get(target, key) {
      if (key === "keeper" && keeper !== "keeper")
        return keeper === "none" ? undefined : { module: join(repoRoot, "test/no-such-keeper.ts"), options: {} }
      if (key === "receive")
        return async (...args: Parameters<SourcePort["receive"]>) => {
          const batch = await target.receive(...args)
          received.push(...batch.map((d) => ({ id: d.id, deliveryCount: d.deliveryCount })))
          return batch
        }
      const value: unknown = Reflect.get(target, key, target)
      return typeof value === "function" ? value.bind(target) : value
    },
  })
}
