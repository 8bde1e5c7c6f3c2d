import { type Context, now } from "./context.ts"
import { defaults } from "./options.ts"

/**
 * The heartbeat is this consumer's lease as other hosts (and other pid namespaces) see it.
 * Every claim refreshes it; this refreshes it while a long batch is in hand too (a slow
 * effect, a stalled file system), whenever this thread is waiting. A consumer that still
 * loses its claims (stopped for longer than the lease) finds them fenced at its commit.
 */
export class Heartbeat {
  readonly #c: Context
  readonly #timer: ReturnType<typeof setInterval>
  /** The heartbeat in flight, if any: one at a time, and awaited before the run ends. */
  #beating: Promise<void> | undefined

  /** Starts beating every quarter lease. */
  constructor(c: Context) {
    this.#c = c
    const lease = c.options.leaseMs ?? defaults.leaseMs
    this.#timer = setInterval(() => void this.#beat(), Math.max(10, lease / 4))
    this.#timer.unref()
  }

  /** Stops beating, once the heartbeat in flight (if any) has ended. */
  async stop(): Promise<void> {
    clearInterval(this.#timer)
    await this.#beating
  }

  async #beat(): Promise<void> {
    if (this.#beating !== undefined) return
    this.#beating = (async () => {
      try {
        await this.#c.ledger.flush(this.#c.owner.ownerId, now())
      } catch (error) {
        this.#c.log.warn("heartbeat", {
          problem: `cannot refresh this consumer's heartbeat: ${error instanceof Error ? error.message : String(error)}`,
        })
      }
    })()
    await this.#beating
    this.#beating = undefined
  }
}
