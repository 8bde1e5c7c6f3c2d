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

/** What a session of spool's is told: the settings every connection starts with. */
export function sessionSettings(busyTimeoutMs: number): Record<string, string> {
  // lock_timeout = 0 would mean no limit at all, the opposite of a busy timeout of 0.
  return { lock_timeout: `${Math.max(1, Math.trunc(busyTimeoutMs))}ms` }
}

/** Whether `error` is a statement stopped by its session's limits: lock_timeout or statement_timeout. */
export function isSessionLimit(error: unknown): boolean {
  const state = pgCode(error)
  return state === "55P03" || state === "57014"
}

/** How a busy timeout is written in a message: `2s`, `1500ms`. */
function shown(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`
}

/**
 * A failure of the PostgreSQL ledger at `url` as a SpoolError that says what happened and what to
 * do (a SpoolError is returned as it is); `busyTimeoutMs` is the sessions' lock_timeout.
 */
export function asLedgerError(error: unknown, url: string, busyTimeoutMs?: number): unknown {
  if (error instanceof SpoolError) return error
  const message = error instanceof Error ? error.message : String(error)
  const state = pgCode(error)
  const code = (error as { code?: unknown })?.code
  const at = redact(url)
  const fail = (text: string) => new SpoolError("ledger", text, { cause: error })
  if (state === "55P03")
    return fail(
      `the PostgreSQL ledger at ${at} was locked by another session for more than ${busyTimeoutMs === undefined ? "the busy timeout" : shown(busyTimeoutMs)} (${message}); find the session holding the lock (pg_blocking_pids in pg_stat_activity) and end it or let it finish, or raise --busy-timeout, then run again`,
    )
  if (/ECONNREFUSED|ERR_POSTGRES_CONNECTION|connection|ENOTFOUND|timeout/i.test(`${code ?? ""} ${message}`))
    return fail(
      `cannot reach the PostgreSQL ledger at ${at}: ${message}; check that the server runs and the URL (--ledger or SPOOL_LEDGER_URL) is right`,
    )
  return fail(`PostgreSQL ledger ${at}: ${message}`)
}
