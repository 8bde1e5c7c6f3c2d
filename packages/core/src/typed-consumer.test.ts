import { afterEach, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pgUnavailable, tempDatabase } from "@spool/test-support"
import { SQL } from "bun"
import { createQueue, type Queue } from "./queue/root.ts"
import { TransientError } from "./transient.ts"
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
  it("refuses every drain once its root is no longer the one it opened, however often it is asked", async () => {
    const q = tempQueue(1)
    const other = tempQueue(1)
    const consumer = createConsumer({ root: q.root, durable: false, handle: () => {} })
    cleanups.push(() => consumer.close())
    expect((await consumer.drain()).processed).toBe(1)
    fs.renameSync(q.root, `${q.root}.orig`)
    fs.renameSync(other.root, q.root)
    for (let i = 0; i < 2; i++) await expect(consumer.drain()).rejects.toThrow(`${q.root} changed under this run`)
    expect(fs.readdirSync(q.inbox)).toEqual(["m-1.json"])
    fs.renameSync(q.root, other.root)
    fs.renameSync(`${q.root}.orig`, q.root)
  })

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

  it("refuses options no drain could run with, before it opens anything", () => {
    const q = tempQueue(1)
    for (const [options, said] of [
      [{ batchSize: 2.5 }, "createConsumer: batchSize must be a whole number of at least 1 (was 2.5)"],
      [{ batchSize: 0 }, "(was 0)"],
      [{ maxBytes: Number.NaN }, "maxBytes must be a whole number of at least 0 (was NaN)"],
      [{ rescanMs: 0 }, "rescanMs must be a finite number above 0"],
      [
        { defer: { firstMs: Number.NaN } },
        "createConsumer: defer.firstMs must be a finite number of milliseconds, 0 or more",
      ],
    ] as const) {
      expect(() => createConsumer({ root: q.root, ...options })).toThrow(said)
      expect(fs.existsSync(join(q.root, "ledger.db"))).toBe(false)
    }
  })

  it("defers a message whose TransientError asks for NaN ms, and commits the rest of its batch", async () => {
    const q = tempQueue(3)
    using consumer = createConsumer({
      root: q.root,
      durable: false,
      handle: (m) => {
        // A Retry-After header holding a date, read as a number.
        if (m.msg_id === "m-2") throw new TransientError("rate limited", { retryAfterMs: Number("Wed, 21 Oct") })
      },
    })
    expect(await consumer.drain()).toMatchObject({ processed: 2, deferred: 1 })
    expect(fs.readdirSync(q.deferred)).toEqual(["m-2.json"])
  })

  it("tells onOutcome every message of a batch though it throws on one, and why each handler failed", async () => {
    const q = tempQueue(5)
    const told: [string, string, string | undefined][] = []
    const warned: unknown[] = []
    using consumer = createConsumer({
      root: q.root,
      durable: false,
      logger: (level, msg, fields) => void (level === "warn" && warned.push([msg, fields])),
      handle: ((m: { msg_id: string }) => {
        if (m.msg_id === "m-3") return { n: 1n }
        if (m.msg_id === "m-4") return Promise.reject(new Error("late"))
        return undefined
      }) as () => void,
      onOutcome: ({ file, verdict, error }) => {
        told.push([file, verdict, error?.message])
        if (file === "m-1.json") throw new Error("sink down")
      },
    })
    await consumer.drain()
    expect(told.sort()).toEqual([
      ["m-1.json", "processed", undefined],
      ["m-2.json", "processed", undefined],
      ["m-3.json", "handler-rejected", expect.stringContaining("cannot be stored as JSON")],
      ["m-4.json", "handler-rejected", expect.stringContaining("the handler returned a promise")],
      ["m-5.json", "processed", undefined],
    ])
    expect(warned).toEqual([["on-outcome-failed", { file: "m-1.json", msg_id: "m-1", error: "sink down" }]])
  })

  it("ends a watch at close(), which then returns", async () => {
    const q = tempQueue(3)
    const consumer = createConsumer({ root: q.root, durable: false })
    const watching = consumer.watch(new AbortController().signal)
    for (const deadline = Date.now() + 10_000; fs.readdirSync(q.done).length < 3; await Bun.sleep(10))
      if (Date.now() > deadline) throw new Error("the watch never drained")
    await consumer[Symbol.asyncDispose]()
    expect(await watching).toMatchObject({ processed: 3 })
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

  it("tells a message that succeeds on its next drain no error of the drain that failed", async () => {
    const db = await tempDatabase()
    cleanups.push(() => db[Symbol.asyncDispose]())
    const q = tempQueue(3)
    const told: [string, string, string | undefined][] = []
    const other = new SQL({ url: db.url, max: 1 })
    cleanups.push(() => other.close())
    await other`CREATE TABLE locked (id INT PRIMARY KEY, n INT)`
    await other`INSERT INTO locked VALUES (1, 0)`
    const holder = await other.reserve()
    await using consumer = await createPostgresConsumer({
      root: q.root,
      ledger: db.url,
      busyTimeoutMs: 300,
      async handle(_m, tx) {
        await tx`UPDATE locked SET n = n + 1 WHERE id = 1`
      },
      onOutcome: ({ file, verdict, error }) => void told.push([file, verdict, error?.message]),
    })
    try {
      await holder`BEGIN`
      await holder`SELECT * FROM locked WHERE id = 1 FOR UPDATE`
      await expect(consumer.drain()).rejects.toThrow("lock")
    } finally {
      await holder`ROLLBACK`
      holder.release()
    }
    expect((await consumer.drain()).processed).toBe(3)
    expect(told.sort()).toEqual([
      ["m-1.json", "processed", undefined],
      ["m-2.json", "processed", undefined],
      ["m-3.json", "processed", undefined],
    ])
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
