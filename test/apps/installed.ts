// An application of @spool/core as one outside this repository writes it, used by
// packaging.test.ts: the test installs @spool/core into a fresh directory, copies this file
// there as app.ts, type-checks it with that directory's tsconfig and runs it.
// Run: bun app.ts ROOT; prints the consume summary and the handler's rows as JSON.
import { type ConsumerConfig, type ConsumeSummary, createConsumer, Message, minorUnits } from "@spool/core"
import { quoteName } from "@spool/core/engine"

const Payment = Message.and({ currency: "'EUR' | 'USD'" })
type Payment = typeof Payment.infer

const config: ConsumerConfig<Payment> = {
  root: process.argv[2] as string,
  type: Payment,
  setup(db) {
    db.run(
      "CREATE TABLE IF NOT EXISTS payments (file TEXT PRIMARY KEY, order_no TEXT NOT NULL, cents INTEGER NOT NULL)",
    )
  },
  handle(payment, db, delivery) {
    db.run("INSERT INTO payments (file, order_no, cents) VALUES (?, ?, ?)", [
      quoteName(delivery.file),
      payment.order_no,
      minorUnits(payment.amount),
    ])
  },
}

using consumer = createConsumer(config)
const summary: ConsumeSummary = await consumer.drain()
const rows = consumer.ledger.db.query("SELECT file, order_no, cents FROM payments ORDER BY file").all()
process.stdout.write(`${JSON.stringify({ summary, rows })}\n`)
