// The PostgreSQL ledger's own vacuum of its claims table.
import type { SQL } from "bun"

/**
 * Claim rows forgotten between two vacuums of the claims table: five batches' worth at the
 * default batch size. Against 20,000 the server spends 8 to 15% less CPU, its vacuums included
 * (BENCHMARKS.md, The PostgreSQL ledger); 2,000 was no better than 5,000.
 */
const vacuumEvery = 5_000

/**
 * Every claim row lives for one batch: a consumer inserts and deletes a thousand a batch, and
 * the fence, the forget and the claim find their rows through the primary key's range of the
 * root, which holds every dead row until a vacuum removes it. Autovacuum comes at most once a
 * naptime (a minute by default, hundreds of thousands of dead rows at this rate), or never
 * where it is off, and each statement then costs in proportion to the dead rows: at a million
 * messages, a third of a second a statement. So the ledger vacuums claims itself, in the
 * background on a connection of its pool, after every `vacuumEvery` rows its claim transactions
 * forgot (those of inbox/ files, landed deliveries and pickups from deferred/). VACUUM
 * takes no lock a consumer waits on; SKIP_LOCKED leaves the table to another consumer's vacuum
 * already running; a role that does not own the table gets a warning, not an error, and
 * autovacuum's pace.
 */
export class ClaimsVacuum {
  readonly #sql: SQL
  #forgotten = 0
  #running: Promise<unknown> | undefined

  constructor(sql: SQL) {
    this.#sql = sql
  }

  /** Counts claim rows forgotten, and starts a vacuum when enough have been since the last. */
  forgot(rows: number): void {
    this.#forgotten += rows
    if (this.#forgotten < vacuumEvery || this.#running !== undefined) return
    this.#forgotten = 0
    this.#running = this.#sql
      .unsafe("VACUUM (SKIP_LOCKED) claims")
      .catch(() => {}) // a failed vacuum only leaves the dead rows to the next one
      .finally(() => {
        this.#running = undefined
      })
  }

  /** Waits for a vacuum under way, before the pool closes. */
  async finished(): Promise<void> {
    await this.#running
  }
}
