// How long to wait between attempts to reach a broker again, and when to stop trying: shared by
// the source adapters that reconnect by themselves.

/** How a lost broker is tried again. */
export interface ReconnectPolicy {
  /** The wait before the second attempt (the first is immediate); default 100 ms. */
  readonly initialDelayMs?: number
  /** The longest wait between attempts; default 5 s. */
  readonly maxDelayMs?: number
  /**
   * How long an outage may last, from its first failed attempt, before the operation that
   * needed the broker fails; default 60 s. `Infinity` waits for the broker for ever (a
   * long-running consumer that a supervisor would only restart into the same wait).
   */
  readonly giveUpAfterMs?: number
}

/** What opening any broker source takes besides its own tuning. */
export interface OpenWait {
  /**
   * Ends the open while it waits for a broker out of reach (a stop at the start of a run): the
   * open then closes what it opened and rejects with the signal's reason.
   */
  readonly signal?: AbortSignal
}

/** The delays of one outage: doubling from the initial delay up to the maximum, with jitter. */
export class Backoff {
  readonly #initial: number
  readonly #max: number
  readonly #giveUpAfter: number
  readonly #random: () => number
  #attempt = 0
  #since: number | undefined

  constructor(policy: ReconnectPolicy = {}, random: () => number = Math.random) {
    this.#initial = Math.max(0, policy.initialDelayMs ?? 100)
    this.#max = Math.max(this.#initial, policy.maxDelayMs ?? 5000)
    this.#giveUpAfter = Math.max(0, policy.giveUpAfterMs ?? 60_000)
    this.#random = random
  }

  /**
   * The wait before the next attempt after one failed at `now`, or undefined once the outage
   * has lasted longer than the policy allows.
   */
  next(now: number): number | undefined {
    this.#since ??= now
    if (now - this.#since >= this.#giveUpAfter) return undefined
    const ceiling = Math.min(this.#max, this.#initial * 2 ** this.#attempt++)
    // Half fixed, half random: consumers cut off together do not all come back at once, and
    // each still waits at least half the ceiling.
    const delay = ceiling / 2 + (this.#random() * ceiling) / 2
    return Math.min(delay, Math.max(0, this.#since + this.#giveUpAfter - now))
  }

  /** How long the outage has lasted at `now`, 0 when there is none. */
  elapsed(now: number): number {
    return this.#since === undefined ? 0 : now - this.#since
  }

  /** The broker answered: the next outage starts from the initial delay. */
  reset(): void {
    this.#attempt = 0
    this.#since = undefined
  }
}

/** Resolves after `ms`, or at once when `signal` aborts (it never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve()
    const done = () => {
      clearTimeout(timer)
      signal?.removeEventListener("abort", done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal?.addEventListener("abort", done, { once: true })
  })
}
