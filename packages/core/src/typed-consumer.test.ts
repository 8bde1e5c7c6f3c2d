import { afterEach, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pgUnavailable, tempDatabase } from "@spool/test-support"
import { SQL } from "bun"
import { createQueue, type Queue } from "./queue/root.ts"
import { createConsumer, createPostgresConsumer, type Delivery } from "./typed-consumer.ts"

const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c()
})

function tempQueue(count: number): Queue {
  const dir = fs.mkdtempSync(join(tmpdir(), "spool-typed-"))
  const q = createQueue(join(dir, "q"))
  for (let i = 1; i <= count; i++)
    fs.writeFileSync(
      join(q.inbox, `m-${i}.json`),
      JSON.stringify({ msg_id: `m-${i}`, order_no: "O-1", seq: i, amount: i }),
    )
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
  return q
}

describe("createConsumer (SQLite)", () => {
  it("waits for the drain in flight when closed during it, and refuses a drain once closed", async () => {
    const q = tempQueue(30)
    const seen: Delivery[] = []
    const consumer = createConsumer({
      root: q.root,
      durable: false,
      batchSize: 4,
      handle: (_m, _db, d) => void seen.push(d),
    })
    const drained = consumer.drain()
    consumer.close()
    expect((await drained).processed).toBe(30)
    expect(seen.find((d) => d.msgId === "m-1")).toEqual({
      file: "m-1.json",
      msgId: "m-1",
      payloadHash: expect.stringMatching(/^[0-9a-f]{64}$/),
    })
    expect(() => consumer.ledger.db.query("SELECT 1").get()).toThrow()
    await expect(consumer.drain()).rejects.toThrow("this consumer is closed")
  })

  it("fails the message of a handler that returns a promise: its writes would land after the commit", async () => {
    const q = tempQueue(2)
    using consumer = createConsumer({
      root: q.root,
      durable: false,
      handle: ((m: { msg_id: string }) => (m.msg_id === "m-2" ? Promise.resolve() : undefined)) as () => void,
    })
    expect(await consumer.drain()).toMatchObject({ processed: 1, rejected: 1 })
    expect(consumer.ledger.failureReason("m-2.json")).toBe("handler")
  })
})

;(pgSkip ? describe.skip : describe)("createPostgresConsumer", () => {
  it("waits for the drain in flight when closed during it, then closes its pool", async () => {
    const db = await tempDatabase()
    cleanups.push(() => db[Symbol.asyncDispose]())
    const q = tempQueue(30)
    const consumer = await createPostgresConsumer({
      root: q.root,
      ledger: db.url,
      batchSize: 4,
      async setup(sql) {
        await sql`CREATE TABLE seen (msg_id TEXT PRIMARY KEY, file TEXT NOT NULL)`
      },
      async handle(m, tx, d) {
        await tx`INSERT INTO seen VALUES (${m.msg_id}, ${d.file})`
      },
    })
    const drained = consumer.drain()
    const closed = consumer.close()
    expect((await drained).processed).toBe(30)
    await closed
    await expect(consumer.ledger.sql`SELECT 1`).rejects.toThrow()
    await expect(consumer.drain()).rejects.toThrow("this consumer is closed")
    await using again = await createPostgresConsumer({ root: q.root, ledger: db.url })
    const [n] = await again.ledger.sql`SELECT COUNT(*)::int AS n FROM seen`
    expect(n).toEqual({ n: 30 })
  })

  it("closes its ledger when setup fails, and opens nothing without a URL", async () => {
    const db = await tempDatabase()
    cleanups.push(() => db[Symbol.asyncDispose]())
    const q = tempQueue(1)
    const failing = createPostgresConsumer({
      root: q.root,
      ledger: db.url,
      async setup(sql) {
        await sql`SELECT no_such_column FROM processed`
      },
    })
    await expect(failing).rejects.toThrow("no_such_column")
    const sql = new SQL({ url: db.url, max: 1 })
    const [others] =
      await sql`SELECT COUNT(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
    await sql.close()
    expect(others).toEqual({ n: 0 })
    const saved = process.env.SPOOL_LEDGER_URL
    delete process.env.SPOOL_LEDGER_URL
    try {
      await expect(createPostgresConsumer({ root: q.root })).rejects.toThrow("set SPOOL_LEDGER_URL")
    } finally {
      if (saved !== undefined) process.env.SPOOL_LEDGER_URL = saved
    }
  })
})
