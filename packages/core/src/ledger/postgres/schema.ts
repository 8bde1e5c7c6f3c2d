// The PostgreSQL ledger's schema: its migrations and its identity.
import type { SQL } from "bun"
import init0001 from "../../../sql/postgres/0001-init.sql" with { type: "text" }
import horizon0002 from "../../../sql/postgres/0002-horizon.sql" with { type: "text" }
import ledgerId0003 from "../../../sql/postgres/0003-ledger-id.sql" with { type: "text" }
import results0004 from "../../../sql/postgres/0004-results.sql" with { type: "text" }
import deferrals0005 from "../../../sql/postgres/0005-deferrals.sql" with { type: "text" }
import origins0006 from "../../../sql/postgres/0006-origins.sql" with { type: "text" }
import deletions0007 from "../../../sql/postgres/0007-deletions.sql" with { type: "text" }
import fewerIndexes0008 from "../../../sql/postgres/0008-fewer-indexes.sql" with { type: "text" }
import { SpoolError } from "../../errors.ts"

/**
 * Schema migrations, one per version: 1 and 2 in step with the SQLite ones (same numbers, same
 * tables); 3 gives the ledger its identity; 4 to 7 in step again; 8 drops the two indexes
 * SQLite's 3 drops.
 */
const migrations: readonly string[] = [
  init0001,
  horizon0002,
  ledgerId0003,
  results0004,
  deferrals0005,
  origins0006,
  deletions0007,
  fewerIndexes0008,
]

/**
 * Every table spool's migrations create, read from the migrations themselves: verify checks
 * each one's indexes, and a table added by a new migration is checked without another list.
 */
export function spoolTables(): string[] {
  return [
    "spool_schema",
    ...migrations.flatMap((m) => [...m.matchAll(/CREATE TABLE (?:IF NOT EXISTS )?(\w+)/gi)].map((t) => t[1] as string)),
  ]
}

// Serialises migrations between consumers that start at once (any constant works: it only
// has to be the same for every spool process).
const MIGRATION_LOCK = 7_270_001

/** Applies the missing migrations, under an advisory lock so hosts starting together migrate once. */
export async function migrate(sql: SQL): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`
    await tx`CREATE TABLE IF NOT EXISTS spool_schema (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`
    const [v] = await tx`SELECT COALESCE(MAX(version), 0)::int AS version FROM spool_schema`
    const current = (v?.version as number) ?? 0
    if (current > migrations.length)
      throw new SpoolError(
        "ledger",
        `the PostgreSQL ledger was written by a newer spool (schema ${current}); upgrade spool`,
      )
    for (let n = current; n < migrations.length; n++) {
      await tx.unsafe(migrations[n] as string)
      await tx`INSERT INTO spool_schema (version, applied_at) VALUES (${n + 1}, ${new Date().toISOString()})`
    }
  })
}

/** The schema version in the database (0 when spool has never run there). */
export async function versionOf(sql: SQL): Promise<number> {
  const [row] = await sql`SELECT to_regclass('spool_schema') IS NOT NULL AS present`
  if (!row?.present) return 0
  const [v] = await sql`SELECT COALESCE(MAX(version), 0)::int AS version FROM spool_schema`
  return (v?.version as number) ?? 0
}

/** The id in spool_ledger, undefined where the table is not there yet. */
export async function ledgerIdOf(sql: SQL): Promise<string | undefined> {
  const [row] = await sql`SELECT to_regclass('spool_ledger') IS NOT NULL AS present`
  if (!row?.present) return undefined
  const [id] = await sql`SELECT ledger_id FROM spool_ledger ORDER BY created_at LIMIT 1`
  return (id?.ledger_id as string | undefined) ?? undefined
}
