import { fault } from "../_fault.ts"
import type { Outcome, Verdict } from "../ledger/model.ts"
import { clockNow } from "../queue/io-thread.ts"
import { type Context, type Item, now } from "./context.ts"

/** Decides each item and commits the batch's outcomes in one transaction; returns when it committed (clockNow). */
export async function commit(c: Context, items: readonly Item[]): Promise<number> {
  await c.decider.load()
  // A landed delivery its source refused (a Redis entry without one body field) comes with its outcome.
  for (const item of items) item.outcome ??= c.decider.decide(item)
  const outcomes = items.map((i) => i.outcome as Outcome)
  const verdicts = await c.ledger.commit(c.owner.ownerId, outcomes, now(), c.options.effect, c.defer)
  const committedAt = clockNow()
  for (const [i, item] of items.entries()) {
    item.committed = true
    item.committedAt = committedAt
    item.verdict = verdicts[i] as Verdict
  }
  await nameDeferred(c, items)
  fault("after-commit")
  await committed(c, outcomes, verdicts)
  return committedAt
}

/** Commits one retried file's outcome on its own, durable against a process crash only (see retryAlone); returns when (clockNow). */
export async function commitAlone(c: Context, item: Item): Promise<number> {
  const outcome = item.outcome as Outcome
  item.verdict = (
    await c.ledger.lazily(() => c.ledger.commit(c.owner.ownerId, [outcome], now(), c.options.effect, c.defer))
  )[0] as Verdict
  const committedAt = clockNow()
  item.committed = true
  item.committedAt = committedAt
  await nameDeferred(c, [item])
  fault("after-commit")
  await committed(c, [outcome], [item.verdict])
  return committedAt
}

/**
 * The names the commit gave its deferred items in deferred/ (a file's own, unless another
 * deferred delivery has it): read back only for a batch that deferred something.
 */
async function nameDeferred(c: Context, items: readonly Item[]): Promise<void> {
  for (const item of items)
    if (item.verdict === "deferred") item.deferredAs = (await c.ledger.deferralOf(item.claimId))?.file ?? item.name
}

/** Tells the run's onCommit of a commit; what it throws cannot undo the commit, and is logged. */
async function committed(c: Context, outcomes: readonly Outcome[], verdicts: readonly Verdict[]): Promise<void> {
  if (c.options.onCommit === undefined) return
  try {
    await c.options.onCommit(outcomes, verdicts)
  } catch (error) {
    c.log.warn("on-commit-failed", { error: error instanceof Error ? error.message : String(error) })
  }
}
