// balances.ts on a PostgreSQL ledger, used by library.test.ts and binding.test.ts: the same
// per-order balance, kept in the ledger's database and updated in the same transaction as the
// idempotency record. Run: bun test/apps/balances-postgres.ts ROOT [URL] (default $SPOOL_LEDGER_URL)
import { createPostgresConsumer, Message, minorUnits } from "@spool/core"

const Payment = Message.and({ currency: "'EUR' | 'USD'" })
const [root, url] = process.argv.slice(2) as [string, string | undefined]

await using consumer = await createPostgresConsumer({
  root,
  ...(url !== undefined && { ledger: url }),
  type: Payment,
  batchSize: 7,
  async setup(sql) {
    await sql`CREATE TABLE IF NOT EXISTS balances (order_no TEXT PRIMARY KEY, cents BIGINT NOT NULL)`
  },
  async handle(payment, tx) {
    if (payment.amount.lt(0)) throw new Error(`refunds are not accepted here (${payment.msg_id})`)
    await tx`
      INSERT INTO balances (order_no, cents) VALUES (${payment.order_no}, ${minorUnits(payment.amount)})
      ON CONFLICT (order_no) DO UPDATE SET cents = balances.cents + excluded.cents`
  },
})
const summary = await consumer.drain()
process.stdout.write(`${JSON.stringify(summary)}\n`)
