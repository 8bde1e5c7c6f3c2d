// A small application built on @spool/core's library API, used by library.test.ts: it keeps
// a per-order balance in the ledger database, updated in the same transaction as the
// idempotency record. Run: bun test/apps/balances.ts ROOT
import { createConsumer, Message, minorUnits } from "@spool/core"

const Payment = Message.and({ currency: "'EUR' | 'USD'" })

using consumer = createConsumer({
  root: process.argv[2] as string,
  type: Payment,
  batchSize: 7,
  setup(db) {
    db.run("CREATE TABLE IF NOT EXISTS balances (order_no TEXT PRIMARY KEY, cents INTEGER NOT NULL)")
  },
  handle(payment, db) {
    if (payment.amount.lt(0)) throw new Error(`refunds are not accepted here (${payment.msg_id})`)
    db.run(
      "INSERT INTO balances (order_no, cents) VALUES (?, ?) ON CONFLICT (order_no) DO UPDATE SET cents = cents + excluded.cents",
      [payment.order_no, minorUnits(payment.amount)],
    )
  },
})
const summary = await consumer.drain()
process.stdout.write(`${JSON.stringify(summary)}\n`)
