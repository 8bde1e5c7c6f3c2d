// Type tests, checked by `tsc` (bun run typecheck), never run: an effect written for one ledger
// backend does not type-check with the other. Each @ts-expect-error fails the typecheck if the
// line below it ever compiles.
import type { Database } from "bun:sqlite"
import type { SQL } from "bun"
import { consume } from "../consume/engine.ts"
import type { Queue } from "../queue/root.ts"
import type { PostgresEffect, PostgresLedger } from "./postgres/ledger.ts"
import type { Effect, SqliteLedger } from "./sqlite/ledger.ts"

declare const queue: Queue
declare const sqlite: SqliteLedger
declare const postgres: PostgresLedger
declare const either: SqliteLedger | PostgresLedger
const onSqlite: Effect = (_o, db: Database) => {
  db.run("SELECT 1")
}
const onPostgres: PostgresEffect = async (_o, tx: SQL) => {
  await tx`SELECT 1`
}

export function typeTests(): void {
  void consume({ queue, ledger: sqlite, effect: onSqlite })
  void consume({ queue, ledger: postgres, effect: onPostgres })
  // No effect: any ledger.
  void consume({ queue, ledger: either })
  // @ts-expect-error an async PostgreSQL effect on the SQLite ledger: its promise would be dropped
  void consume({ queue, ledger: sqlite, effect: onPostgres })
  // @ts-expect-error a SQLite effect on the PostgreSQL ledger: it would get a transaction, not a Database
  void consume({ queue, ledger: postgres, effect: onSqlite })
  // @ts-expect-error a ledger that may be either backend cannot take a backend's effect
  void consume({ queue, ledger: either, effect: onSqlite })
}
