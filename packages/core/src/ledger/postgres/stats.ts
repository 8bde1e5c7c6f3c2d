import type { SQL } from "bun"
import { type DeliveriesRow, type FailureRow, type LedgerStats, statsFrom, statsQuery } from "../stats.ts"

/**
 * The statistics of `stats` from a PostgreSQL ledger: the same stats.sql, with its `:since`
 * bound as `$1`, in one repeatable-read snapshot. PostgreSQL counts are bigints: read as numbers.
 */
export async function readSharedStats(sql: SQL, since: Date): Promise<LedgerStats> {
  const at = since.toISOString()
  return sql.begin("ISOLATION LEVEL REPEATABLE READ READ ONLY", async (tx) => {
    const [d] = (await tx.unsafe(statsQuery("deliveries").replaceAll(":since", "$1"), [at])) as Record<
      string,
      unknown
    >[]
    const f = (await tx.unsafe(statsQuery("failures").replaceAll(":since", "$1"), [at])) as Record<string, unknown>[]
    const numbers = (row: Record<string, unknown>) =>
      Object.fromEntries(
        Object.entries(row).map(([k, v]) => [
          k,
          typeof v === "bigint" || (typeof v === "string" && /^\d+$/.test(v) && k !== "reason") ? Number(v) : v,
        ]),
      )
    return statsFrom(at, numbers(d ?? {}) as unknown as DeliveriesRow, f.map(numbers) as unknown as FailureRow[])
  }) as Promise<LedgerStats>
}
