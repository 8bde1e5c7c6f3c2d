// Type tests, checked by `tsc` (bun run typecheck), never run: a consumer's setup and handler
// get the transaction of its ledger's backend, and one written for the other backend does not
// type-check. Each @ts-expect-error fails the typecheck if the line below it ever compiles.
import type { Database } from "bun:sqlite"
import type { SQL } from "bun"
import type { PostgresLedger } from "./ledger/postgres/ledger.ts"
import type { SqliteLedger } from "./ledger/sqlite/ledger.ts"
import { Message } from "./message/type.ts"
import { createConsumer, createPostgresConsumer, type Delivery, type Exact, minorUnits } from "./typed-consumer.ts"

const Payment = Message.and({ currency: "'EUR' | 'USD'" })
type Payment = typeof Payment.infer

const onSqlite = (payment: Exact<Payment>, db: Database, _d: Delivery) => {
  db.run("INSERT INTO balances VALUES (?, ?)", [payment.order_no, minorUnits(payment.amount)])
}
const onPostgres = async (payment: Exact<Payment>, tx: SQL, _d: Delivery) => {
  await tx`INSERT INTO balances VALUES (${payment.order_no}, ${minorUnits(payment.amount)})`
  return { applied: payment.amount.toFixed(2) }
}
const setupSqlite = (db: Database) => {
  db.run("CREATE TABLE IF NOT EXISTS balances (order_no TEXT PRIMARY KEY, cents INTEGER NOT NULL)")
}
const setupPostgres = async (sql: SQL) => {
  await sql`CREATE TABLE IF NOT EXISTS balances (order_no TEXT PRIMARY KEY, cents BIGINT NOT NULL)`
}

export async function typeTests(): Promise<void> {
  using sqlite = createConsumer({ type: Payment, setup: setupSqlite, handle: onSqlite })
  const local: SqliteLedger = sqlite.ledger
  await using postgres = await createPostgresConsumer({ type: Payment, setup: setupPostgres, handle: onPostgres })
  const shared: PostgresLedger = postgres.ledger
  void [local, shared]

  // The handler's parameters follow the backend when they are not written out.
  createConsumer({
    type: Payment,
    handle(payment, db) {
      db.run("SELECT ?", [payment.currency])
    },
  })
  await createPostgresConsumer({
    type: Payment,
    async handle(payment, tx) {
      await tx`SELECT ${payment.currency}`
    },
  })

  // @ts-expect-error a SQLite handler on the PostgreSQL ledger: it would get a transaction, not a Database
  await createPostgresConsumer({ type: Payment, handle: onSqlite })
  // @ts-expect-error a SQLite setup on the PostgreSQL ledger
  await createPostgresConsumer({ type: Payment, setup: setupSqlite })
  // @ts-expect-error a PostgreSQL handler on the SQLite ledger: its promise would be dropped after the commit
  createConsumer({ type: Payment, handle: onPostgres })
  // @ts-expect-error a PostgreSQL setup on the SQLite ledger
  createConsumer({ type: Payment, setup: setupPostgres })
  await createPostgresConsumer({
    type: Payment,
    handle(_payment, tx) {
      // @ts-expect-error a PostgreSQL transaction has no bun:sqlite methods
      tx.run("SELECT 1")
    },
  })
  createConsumer({
    type: Payment,
    handle(payment) {
      // @ts-expect-error the amount is an exact decimal, not a double that arithmetic would round
      const rounded: number = payment.amount
      return { cents: String(minorUnits(payment.amount)), rounded }
    },
  })
  createConsumer({
    type: Payment,
    // @ts-expect-error a SQLite handler must be synchronous: a promise's writes would land outside the transaction
    async handle(payment, db) {
      db.run("SELECT ?", [payment.currency])
    },
  })
  createConsumer({
    type: Payment,
    // @ts-expect-error a result is stored as JSON: a function cannot be
    handle: () => () => 1,
  })
  // @ts-expect-error the SQLite ledger lives in the root: a URL is createPostgresConsumer's
  createConsumer({ ledger: "postgres://db/spool" })
  // @ts-expect-error a PostgreSQL consumer closes asynchronously: `using` would not wait for it
  using _sync = await createPostgresConsumer()
}
