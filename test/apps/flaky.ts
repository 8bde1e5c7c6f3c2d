// A library application whose handler fails transiently twice for about a third of the
// messages, then applies them: each such message is deferred twice (TransientError, due at
// once) before it commits. Its effect is a row in `applied`, in the commit's transaction, so
// a message applied twice is a primary-key failure, not a silent double. Used by
// kill-storm.test.ts with the random-kill driver, so it takes consume's way of being run:
//   bun test/apps/flaky.ts --root ROOT [--batch-size N] [--ledger URL]
import { parseArgs } from "node:util"
import { createConsumer, createPostgresConsumer, TransientError } from "@spool/core"

const { values: v } = parseArgs({
  options: { root: { type: "string" }, "batch-size": { type: "string" }, ledger: { type: "string" } },
  strict: true,
})
const root = v.root as string
const batchSize = v["batch-size"] === undefined ? undefined : Number(v["batch-size"])
// No wait between attempts: a deferred file is due in the next pass of the same run.
const defer = { firstMs: 0, maxMs: 0 }

/** Whether a msg_id is one of the flaky third (by its characters, so every run picks the same). */
const isFlaky = (msgId: string): boolean => [...msgId].reduce((h, c) => (h * 31 + c.charCodeAt(0)) % 997, 7) % 3 === 0

/** Throws a TransientError for a flaky message deferred fewer than twice so far. */
function failIfTooEarly(msgId: string, deferredSoFar: number): void {
  if (isFlaky(msgId) && deferredSoFar < 2) throw new TransientError(`downstream busy for ${msgId}`)
}

if (v.ledger !== undefined) {
  await using consumer = await createPostgresConsumer({
    root,
    ledger: v.ledger,
    defer,
    ...(batchSize !== undefined && { batchSize }),
    async setup(sql) {
      await sql`CREATE TABLE IF NOT EXISTS applied (msg_id TEXT PRIMARY KEY)`
    },
    async handle(m, tx) {
      const [row] = await tx`SELECT attempts FROM deferrals WHERE msg_id = ${m.msg_id}`
      failIfTooEarly(m.msg_id, Number(row?.attempts ?? 0))
      await tx`INSERT INTO applied (msg_id) VALUES (${m.msg_id})`
    },
  })
  process.stdout.write(`${JSON.stringify(await consumer.drain())}\n`)
} else {
  using consumer = createConsumer({
    root,
    defer,
    ...(batchSize !== undefined && { batchSize }),
    setup(db) {
      db.run("CREATE TABLE IF NOT EXISTS applied (msg_id TEXT PRIMARY KEY)")
    },
    handle(m, db) {
      const row = db.query("SELECT attempts FROM deferrals WHERE msg_id = ?").get(m.msg_id) as {
        attempts: number
      } | null
      failIfTooEarly(m.msg_id, row?.attempts ?? 0)
      db.run("INSERT INTO applied (msg_id) VALUES (?)", [m.msg_id])
    },
  })
  process.stdout.write(`${JSON.stringify(await consumer.drain())}\n`)
}
