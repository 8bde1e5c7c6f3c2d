import type { SQL, TransactionSQL } from "bun"
import { inOrder } from "./claims.ts"
import { pgCode } from "./errors.ts"

// Deadlocks and serialization failures are retried: the transaction rolled back whole.
const RETRYABLE = new Set(["40P01", "40001"])

/** Runs `attempt` again, a little later each time, while it fails with a deadlock or a serialization failure (up to 8 times). */
async function retried<T>(attempt: () => Promise<T>): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt()
    } catch (error) {
      const code = pgCode(error)
      if (code === undefined || !RETRYABLE.has(code) || n >= 8) throw error
      await Bun.sleep(Math.random() * 20 * n)
    }
  }
}

/** Runs `fn` in a transaction, retrying it whole on deadlock or serialization failure. */
export function inTransaction<T>(sql: SQL, fn: (tx: TransactionSQL) => Promise<T>): Promise<T> {
  return retried(async () => (await sql.begin((tx) => fn(tx))) as T)
}

/**
 * Runs the statements `build` makes as one transaction sent in one round trip: BEGIN, them and
 * COMMIT go out together, and the server runs them in order. A statement that fails aborts the
 * transaction, the COMMIT behind it then rolls it back, and its error is thrown. Retried whole
 * on deadlock or serialization failure. Returns what each statement returned. For a
 * transaction whose statements do not depend on each other's answers.
 */
export function inOneRoundTrip(
  sql: SQL,
  build: (q: SQL) => readonly (PromiseLike<unknown> | undefined)[],
): Promise<unknown[]> {
  return retried(async () => {
    const q = await sql.reserve()
    try {
      return (await inOrder([q`BEGIN`, ...build(q), q`COMMIT`])).slice(1, -1)
    } finally {
      await q.release()
    }
  })
}
