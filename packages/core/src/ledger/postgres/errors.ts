// PostgreSQL's errors turned into ones that say what to do, and URLs made safe to print. This is
// the one place a failure of the PostgreSQL ledger is classified: PostgresLedger passes every
// method's failure through asLedgerError (see translateFailures), whichever query it came from.
import { SpoolError } from "../../errors.ts"

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
  return {
    // lock_timeout = 0 would mean no limit at all, the opposite of a busy timeout of 0.
    lock_timeout: `${Math.max(1, Math.trunc(busyTimeoutMs))}ms`,
    // A batch's statements take its names as array parameters. Planned for the values at hand,
    // `name = ANY (array)` is a hashed lookup and unnest's row count is known; a generic plan
    // (which a prepared statement gets after its fifth run) searches the array linearly for
    // every row it filters, a thousand comparisons a row.
    plan_cache_mode: "force_custom_plan",
  }
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

// The session is gone: the server shut down or restarted, an administrator ended it
// (pg_terminate_backend), the idle-in-transaction timeout, or the network.
const sessionEnded = new Set(["57P01", "57P02", "57P03", "25P03"])
const connectionClosed = new Set([
  "ERR_POSTGRES_CONNECTION_CLOSED",
  "ERR_POSTGRES_IDLE_TIMEOUT",
  "ERR_POSTGRES_LIFETIME_TIMEOUT",
])

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
  if (state === "57014" && /statement timeout/i.test(message))
    return fail(
      `a statement on the PostgreSQL ledger at ${at} was cancelled by the server's statement_timeout (${message}); spool's statements must run to their end: raise or reset statement_timeout for the ledger's database and role (ALTER DATABASE ... RESET statement_timeout; ALTER ROLE ... RESET statement_timeout), then run again`,
    )
  if (state === "57014")
    return fail(
      `a statement on the PostgreSQL ledger at ${at} was cancelled by the server (${message}: pg_cancel_backend, or a timeout set for the session); run again`,
    )
  if ((state !== undefined && (sessionEnded.has(state) || state.startsWith("08"))) || connectionClosed.has(`${code}`))
    return fail(
      `the connection to the PostgreSQL ledger at ${at} was closed (${message}): the server shut down or restarted, an administrator ended the session, or the network failed; check that the server runs, then run again`,
    )
  // Login refused or no such database: the server answered, so retrying will not help.
  if (state === "3D000")
    return fail(
      `the PostgreSQL ledger at ${at} names a database the server does not have (${message}); create it (createdb --owner ROLE NAME, see docs/postgres.md) or correct the URL's path (--ledger or SPOOL_LEDGER_URL)`,
    )
  if (state === "28000" || state === "28P01")
    return fail(
      `the PostgreSQL server refused the login of the ledger at ${at} (${message}); create the role (createuser NAME, as docs/postgres.md shows), or correct the URL's user and password (--ledger or SPOOL_LEDGER_URL)`,
    )
  if (state?.startsWith("53"))
    return fail(
      `the PostgreSQL server of the ledger at ${at} is out of resources (${message}); free disk space or connections on the server, then run again`,
    )
  if (
    state === undefined &&
    /ECONNREFUSED|ERR_POSTGRES_CONNECTION|ENOTFOUND|EHOSTUNREACH|ETIMEDOUT/i.test(`${code ?? ""} ${message}`)
  )
    return fail(
      `cannot reach the PostgreSQL ledger at ${at}: ${message}; check that the server runs and the URL (--ledger or SPOOL_LEDGER_URL) is right`,
    )
  return fail(`PostgreSQL ledger ${at}: ${message}`)
}

/**
 * Passes every failure of `target`'s methods through `translate`, whichever query it came from:
 * a promise's rejection, an async iterator's, or a throw. A method added later is covered too,
 * so no query of the engine's can reach a user as an untranslated driver error.
 */
export function translateFailures(target: object, translate: (self: never, error: unknown) => unknown): void {
  const prototype = (target as { prototype: Record<string, unknown> }).prototype
  for (const name of Object.getOwnPropertyNames(prototype)) {
    const descriptor = Object.getOwnPropertyDescriptor(prototype, name)
    const method = descriptor?.value
    if (name === "constructor" || typeof method !== "function") continue
    prototype[name] = function (this: never, ...args: unknown[]) {
      const fail = (error: unknown) => {
        throw translate(this, error)
      }
      let result: unknown
      try {
        result = method.apply(this, args)
      } catch (error) {
        fail(error)
      }
      if (result instanceof Promise) return result.catch(fail)
      if (isAsyncIterator(result)) return translatedIterator(result, fail)
      return result
    }
  }
}

function isAsyncIterator(value: unknown): value is AsyncGenerator<unknown> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value && "next" in value
}

async function* translatedIterator<T>(source: AsyncGenerator<T>, fail: (error: unknown) => never): AsyncGenerator<T> {
  try {
    yield* source
  } catch (error) {
    fail(error)
  }
}
