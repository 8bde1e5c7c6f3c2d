// Transient failures: an effect that throws TransientError says "the system I need is down,
// try later". The message is deferred (the ledger records a deferrals row, then the file moves
// to deferred/) and retried when due, with exponential backoff, until its maximum age.
import { SpoolError } from "./errors.ts"

/**
 * Thrown (or a subclass thrown) by a handler or an effect whose failure is transient: the
 * message is not wrong, something it needs is unavailable. Its writes are rolled back as for
 * any failure, and the message goes to deferred/ to be tried again later rather than to error/.
 * `retryAfterMs` asks for the next attempt no sooner than that (still capped by the policy's
 * maximum delay). Any other error is a permanent `handler` failure.
 */
export class TransientError extends Error {
  override readonly name: string = "TransientError"
  readonly retryAfterMs: number | undefined

  constructor(message: string, options?: ErrorOptions & { readonly retryAfterMs?: number }) {
    super(message, options)
    this.retryAfterMs = options?.retryAfterMs
  }
}

/** Whether `error` asks for a later attempt: a TransientError, of this copy of spool or another's. */
export function isTransient(error: unknown): error is TransientError {
  if (error instanceof TransientError) return true
  // A second copy of @spool/core in one process has its own class: its instances still say so.
  return error instanceof Error && (error as { name?: unknown }).name === "TransientError"
}

/** When a deferred message is tried again, and for how long at most. */
export interface DeferPolicy {
  /** The delay after the first transient failure, in ms; each further one doubles it. */
  readonly firstMs: number
  /** The longest delay between two attempts, in ms. */
  readonly maxMs: number
  /** A message still failing transiently this long after its first deferral goes to error/ as `expired`. */
  readonly maxAgeMs: number
}

/** The defaults, Postfix's: first retry after 5 minutes, at most an hour apart, given up after 5 days. */
export const defaultDeferPolicy: DeferPolicy = {
  firstMs: 5 * 60_000,
  maxMs: 60 * 60_000,
  maxAgeMs: 5 * 24 * 60 * 60_000,
}

/**
 * The delay before the next attempt of a message deferred `attempts` times (1 for the first):
 * `firstMs * 2^(attempts-1)`, capped at `maxMs`, and never less than the error's `retryAfterMs`
 * (itself capped). A `retryAfterMs` that is not a number above 0 (NaN from a Retry-After header
 * parsed as a date, a string from another copy of spool) asks for nothing: a due time spool
 * cannot write would fail the commit of every batch the message is in.
 */
export function backoffMs(policy: DeferPolicy, attempts: number, retryAfterMs?: unknown): number {
  const exp = policy.firstMs * 2 ** Math.min(Math.max(0, attempts - 1), 52)
  const delay = Math.min(policy.maxMs, exp)
  const asked = typeof retryAfterMs === "number" && retryAfterMs > 0 ? retryAfterMs : 0
  return Math.min(policy.maxMs, Math.max(delay, asked))
}

/**
 * The policy of `defer` over the defaults, refused (a usage error that names `where`) unless each
 * field is a number of at least 0, the first delay a finite one: NaN or a string made due times
 * no ledger could write. (A first delay of 0 is taken: the message is tried again within the same
 * drain, which a one-shot drain then keeps doing for as long as the handler fails, up to maxAgeMs.)
 */
export function deferPolicyOf(defer: Partial<DeferPolicy> | undefined, where: string): DeferPolicy {
  const p = { ...defaultDeferPolicy, ...defer }
  const rules = {
    firstMs: [(v: number) => v >= 0 && Number.isFinite(v), "a finite number of milliseconds, 0 or more"],
    maxMs: [(v: number) => v >= 0, "a number of milliseconds, 0 or more"],
    maxAgeMs: [(v: number) => v >= 0, "a number of milliseconds, 0 or more"],
  } as const
  for (const [key, [isValid, what]] of Object.entries(rules) as [
    keyof DeferPolicy,
    (typeof rules)[keyof DeferPolicy],
  ][]) {
    const v: unknown = p[key]
    if (typeof v !== "number" || !isValid(v))
      throw new SpoolError(
        "usage",
        `${where}: defer.${key} must be ${what} (was ${typeof v === "string" ? JSON.stringify(v) : String(v)})`,
      )
  }
  return p
}
