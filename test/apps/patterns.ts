// The idempotency patterns besides insert-once, each inside the ledger transaction, used by
// patterns.test.ts (and shown in the README): an UPSERT (the last write of a field wins,
// whatever the redelivery), a version-checked UPDATE (optimistic locking: a stale version is
// the stored outcome, neither an exception nor a silent drop) and a delete-if-exists (deleting
// what is gone is a result, not an error). Run: bun test/apps/patterns.ts ROOT [URL]
// (a URL: the PostgreSQL ledger there; none: the SQLite ledger in the root).
import { createConsumer, createPostgresConsumer, Message, minorUnits } from "@spool/core"

const Command = Message.and({
  op: "'set-email' | 'withdraw' | 'drop-cart'",
  target: "string",
  "email?": "string",
  "expected_version?": "number.integer",
})
const [root, url] = process.argv.slice(2) as [string, string | undefined]

const tables = [
  "CREATE TABLE IF NOT EXISTS customers (id TEXT PRIMARY KEY, email TEXT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, cents BIGINT NOT NULL, version INTEGER NOT NULL)",
  "CREATE TABLE IF NOT EXISTS carts (id TEXT PRIMARY KEY)",
  // The first setup only: a later start must not put back the cart a command deleted.
  "INSERT INTO carts SELECT 'cart-1' WHERE NOT EXISTS (SELECT 1 FROM accounts)",
  "INSERT INTO accounts VALUES ('acct-1', 10000, 1) ON CONFLICT DO NOTHING",
]

if (url) {
  await using consumer = await createPostgresConsumer({
    root,
    ledger: url,
    type: Command,
    async setup(sql) {
      for (const t of tables) await sql.unsafe(t)
    },
    async handle(c, tx) {
      if (c.op === "set-email") {
        await tx`INSERT INTO customers VALUES (${c.target}, ${c.email ?? ""})
                 ON CONFLICT (id) DO UPDATE SET email = excluded.email`
        return { op: c.op, email: c.email ?? "" }
      }
      if (c.op === "withdraw") {
        const [row] = await tx`UPDATE accounts SET cents = cents - ${minorUnits(c.amount)}, version = version + 1
                               WHERE id = ${c.target} AND version = ${c.expected_version ?? 0} RETURNING version`
        if (row) return { op: c.op, applied: true, version: row.version }
        const [now] = await tx`SELECT version FROM accounts WHERE id = ${c.target}`
        return { op: c.op, applied: false, stale: c.expected_version ?? 0, current: now?.version ?? null }
      }
      const gone = await tx`DELETE FROM carts WHERE id = ${c.target}`
      return { op: c.op, deleted: gone.count }
    },
  })
  process.stdout.write(`${JSON.stringify(await consumer.drain())}\n`)
} else {
  using consumer = createConsumer({
    root,
    type: Command,
    setup(db) {
      for (const t of tables) db.run(t)
    },
    handle(c, db) {
      if (c.op === "set-email") {
        db.run("INSERT INTO customers VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET email = excluded.email", [
          c.target,
          c.email ?? "",
        ])
        return { op: c.op, email: c.email ?? "" }
      }
      if (c.op === "withdraw") {
        const row = db
          .query(
            "UPDATE accounts SET cents = cents - ?, version = version + 1 WHERE id = ? AND version = ? RETURNING version",
          )
          .get(minorUnits(c.amount), c.target, c.expected_version ?? 0) as { version: number } | null
        if (row) return { op: c.op, applied: true, version: row.version }
        const now = db.query("SELECT version FROM accounts WHERE id = ?").get(c.target) as { version: number } | null
        return { op: c.op, applied: false, stale: c.expected_version ?? 0, current: now?.version ?? null }
      }
      return { op: c.op, deleted: db.run("DELETE FROM carts WHERE id = ?", [c.target]).changes }
    },
  })
  process.stdout.write(`${JSON.stringify(await consumer.drain())}\n`)
}
