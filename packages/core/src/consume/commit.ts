import { fault } from "../_fault.ts"
import type { Outcome, Verdict } from "../ledger.ts"
import { type Context, type Item, now } from "./context.ts"

/** Decides each item and commits the batch's outcomes in one transaction. */
export async function commit(c: Context, items: readonly Item[]): Promise<void> {
  await c.decider.load()
  for (const item of items) item.outcome = c.decider.decide(item)
  const outcomes = items.map((i) => i.outcome as Outcome)
  const verdicts = await c.ledger.commit(c.owner.ownerId, outcomes, now(), c.options.effect)
  for (const [i, item] of items.entries()) {
    item.committed = true
    item.verdict = verdicts[i] as Verdict
  }
  fault("after-commit")
}

/** Commits one retried file's outcome on its own, durable against a process crash only (see retryAlone). */
export async function commitAlone(c: Context, item: Item): Promise<void> {
  const outcome = item.outcome as Outcome
  item.verdict = (
    await c.ledger.lazily(() => c.ledger.commit(c.owner.ownerId, [outcome], now(), c.options.effect))
  )[0] as Verdict
  item.committed = true
  fault("after-commit")
}
