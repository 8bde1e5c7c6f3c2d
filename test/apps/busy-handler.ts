// A library application on the SQLite ledger whose handler holds the main thread: for a message
// whose seq is at most BUSY_SEQ it busy-waits BUSY_MS synchronously (a CPU-bound effect, which
// no timer on this thread interrupts), then records the msg_id in `applied`. Drains SOURCE and
// prints the summary. Run: SOURCE=nats://... bun test/apps/busy-handler.ts ROOT
import { createConsumer } from "@spool/core"

const root = process.argv[2] as string
const busyMs = Number(process.env.BUSY_MS ?? "2500")
const busySeq = Number(process.env.BUSY_SEQ ?? "1")

using consumer = createConsumer({
  root,
  source: process.env.SOURCE as string,
  batchSize: 3,
  idleWaitMs: 1000,
  setup(db) {
    db.run("CREATE TABLE IF NOT EXISTS applied (msg_id TEXT NOT NULL)")
  },
  handle(m, db) {
    if (m.seq <= busySeq) {
      const until = performance.now() + busyMs
      while (performance.now() < until) {}
    }
    db.run("INSERT INTO applied (msg_id) VALUES (?)", [m.msg_id])
  },
})
const summary = await consumer.drain()
process.stdout.write(`${JSON.stringify(summary)}\n`)
