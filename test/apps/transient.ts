// A library application whose downstream can be down, used by deferred.test.ts: while the file
// named by DOWN exists, every handler call throws TransientError (PERMANENT=1: a plain Error);
// otherwise it records the msg_id in an `applied` table in the same transaction. SQLite, or
// PostgreSQL when SPOOL_LEDGER_URL is set. DEFER_FIRST_MS, DEFER_MAX_MS, DEFER_MAX_AGE_MS set the
// policy. Prints the drain's summary. Run: bun test/apps/transient.ts ROOT
import fs from "node:fs"
import { createConsumer, createPostgresConsumer, type DeferPolicy, TransientError } from "@spool/core"

const root = process.argv[2] as string
const down = process.env.DOWN
const ms = (v: string | undefined) => (v === undefined ? undefined : Number(v))
const defer: Partial<DeferPolicy> = Object.fromEntries(
  Object.entries({
    firstMs: ms(process.env.DEFER_FIRST_MS),
    maxMs: ms(process.env.DEFER_MAX_MS),
    maxAgeMs: ms(process.env.DEFER_MAX_AGE_MS),
  }).filter(([, v]) => v !== undefined),
)

function check(msgId: string): void {
  if (down === undefined || !fs.existsSync(down)) return
  if (process.env.PERMANENT === "1") throw new Error(`rejected ${msgId} for good`)
  throw new TransientError(`downstream unavailable for ${msgId}`)
}

const summary = process.env.SPOOL_LEDGER_URL
  ? await (async () => {
      await using consumer = await createPostgresConsumer({
        root,
        defer,
        batchSize: 3,
        async setup(sql) {
          await sql`CREATE TABLE IF NOT EXISTS applied (msg_id TEXT PRIMARY KEY)`
        },
        async handle(m, tx) {
          check(m.msg_id)
          await tx`INSERT INTO applied (msg_id) VALUES (${m.msg_id})`
        },
      })
      return consumer.drain()
    })()
  : await (() => {
      using consumer = createConsumer({
        root,
        defer,
        batchSize: 3,
        setup(db) {
          db.run("CREATE TABLE IF NOT EXISTS applied (msg_id TEXT PRIMARY KEY)")
        },
        handle(m, db) {
          check(m.msg_id)
          db.run("INSERT INTO applied (msg_id) VALUES (?)", [m.msg_id])
        },
      })
      return consumer.drain()
    })()
process.stdout.write(`${JSON.stringify(summary)}\n`)
