// PostgreSQL's errors turned into ones that say what to do, and URLs made safe to print.
import { SpoolError } from "./errors.ts"

/** The SQLSTATE of a PostgreSQL error, or undefined. */
export function pgCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined
  const e = error as { errno?: unknown; code?: unknown }
  return typeof e.errno === "string" ? e.errno : undefined
}

/** The URL without its password, for messages. */
export function redact(url: string): string {
  try {
    const u = new URL(url)
    if (u.password) u.password = "***"
    return u.toString()
  } catch {
    return "the PostgreSQL ledger"
  }
}

export function asLedgerError(error: unknown, url: string): unknown {
  if (error instanceof SpoolError) return error
  const message = error instanceof Error ? error.message : String(error)
  const code = (error as { code?: string })?.code ?? ""
  if (/ECONNREFUSED|ERR_POSTGRES_CONNECTION|connection|ENOTFOUND|timeout/i.test(`${code} ${message}`))
    return new SpoolError(
      "ledger",
      `cannot reach the PostgreSQL ledger at ${redact(url)}: ${message}; check that the server runs and the URL (--ledger or SPOOL_LEDGER_URL) is right`,
      { cause: error },
    )
  return new SpoolError("ledger", `PostgreSQL ledger ${redact(url)}: ${message}`, { cause: error })
}
