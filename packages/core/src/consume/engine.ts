import type { AnyEffect } from "../ledger/port.ts"
import type { Message } from "../message/validate.ts"
import { holdOwner } from "../queue/owner.ts"
import { judgeEntry, scanDir } from "../queue/root.ts"
import { claimDue, claimHere, renameUndecodable } from "./claim.ts"
import { commit } from "./commit.ts"
import { Context, now } from "./context.ts"
import { handBack, withLeftovers } from "./hand-back.ts"
import { Heartbeat } from "./heartbeat.ts"
import { moveHere } from "./move.ts"
import type { ConsumeOptions } from "./options.ts"
import { Pipeline } from "./pipeline.ts"
import { recover } from "./recover.ts"
import { consumeSource } from "./source-loop.ts"
import type { ConsumeSummary } from "./summary.ts"

/**
 * Drains inbox/ once: recovers abandoned claims, then claims, processes, commits and moves
 * batch after batch until a full pass over inbox/ claims nothing. With a `source`, the batches
 * come from the broker instead, landed as claimed files (consume/source-loop.ts has its steps).
 *
 * The delivery protocol, and what is durable after each step:
 * 1. claim: a ledger transaction records (name, claim_id, owner) for a batch of names.
 *    Only then is each file renamed inbox/ -> processing/ (no-replace); processing/ is fsynced.
 *    A file in processing/ therefore always has a claim row naming its owner.
 * 2. commit: one transaction writes processed/duplicates/failures and marks each claim
 *    committed with its destination. After COMMIT (synchronous=FULL) the effect is durable.
 * 3. move: each file is renamed to done/ or error/ (no-replace), and the directories fsynced.
 *    The move is the acknowledgement; it happens only after the commit.
 * 4. forget: the committed claim rows are deleted in the next claim transaction.
 * Recovery takes dead owners' claims: a committed claim is only moved (never re-processed,
 * so it is not a duplicate); a claimed one is processed again, counting an attempt.
 */
export async function consume<T extends Message = Message, E extends AnyEffect = never>(
  options: ConsumeOptions<T, E>,
): Promise<ConsumeSummary> {
  // The pair is checked here, at the API: the effect is one the ledger runs. Inside, the engine
  // only hands that effect back to the ledger it came with.
  const engine = new Engine(options as unknown as ConsumeOptions<T>)
  return engine.run()
}

/** One consume run: recovery, then passes over inbox/, each step done by its own module. */
class Engine {
  readonly #c: Context
  /** The second thread's pipeline, once a pass has claimed a full batch (with the pipeline on). */
  #pipeline: Pipeline | undefined

  constructor(options: ConsumeOptions) {
    this.#c = new Context(options)
  }

  async run(): Promise<ConsumeSummary> {
    const c = this.#c
    const release = holdOwner(c.owner.ownerId)
    const heartbeat = new Heartbeat(c)
    try {
      await c.ledger.registerConsumer(c.owner, now())
      await recover(c)
      if (c.options.source !== undefined) await consumeSource(c, c.options.source, () => this.#takeDue(now()))
      else
        while (!c.isStopping) {
          const claimedAny = await this.#pass()
          if (!claimedAny) break
        }
      await c.ledger.unregisterConsumer(c.owner.ownerId)
    } catch (error) {
      throw withLeftovers(error, await handBack(c, this.#pipeline), c.queue.processing)
    } finally {
      await heartbeat.stop()
      this.#pipeline?.close()
      c.close()
      release()
    }
    return c.summary
  }

  /** One pass over inbox/: claims and finishes batches; true if it claimed anything. */
  async #pass(): Promise<boolean> {
    const c = this.#c
    c.passClaimed = false
    const names: string[] = []
    const regular = new Set<string>()
    const passStart = Date.now()
    let hasUndecodable = false
    let deferred = 0
    // Due times are written by spool's clock (now()); file ages below are the kernel's mtimes.
    await this.#takeDue(now())
    for (const e of scanDir(c.queue.inbox, 1024)) {
      const fate = judgeEntry(c.queue.inbox, e.name, c.minAgeMs, passStart)
      // An undecodable name is renamed to its %XX spelling below, and taken in the next pass.
      if (fate === "undecodable") hasUndecodable = true
      else if (fate === "too-young") deferred++
      if (fate !== "take") continue
      names.push(e.name)
      if (e.isFile()) regular.add(e.name)
      if (names.length < c.batchSize) continue
      await this.#claimBatch(names, regular)
      names.length = 0
      regular.clear()
      if (c.isStopping) break
    }
    if (names.length > 0 && !c.isStopping) await this.#claimBatch(names, regular)
    await this.#pipeline?.drain()
    if (hasUndecodable && !c.isStopping && renameUndecodable(c) > 0) c.passClaimed = true
    c.summary.deferred = deferred + c.youngOrphans
    return c.passClaimed
  }

  /**
   * Takes the deferred files due at `at` (the pass's start) before the pass's inbox/ files,
   * batch by batch, earliest due first, on this thread: a file deferred again meanwhile is
   * due after `at`, so each pass tries a deferred file at most once.
   */
  async #takeDue(at: string): Promise<void> {
    const c = this.#c
    while (!c.isStopping) {
      const due = await c.ledger.dueDeferrals(at, c.batchSize)
      if (due.length === 0) return
      await this.#pipeline?.drain()
      const held = await claimDue(c, due)
      // Nothing claimable: held by other consumers, or waiting for this one's claims to be forgotten.
      if (held === undefined) return
      await moveHere(c, held, await commit(c, held))
      c.passClaimed = true
    }
  }

  async #claimBatch(names: readonly string[], regular: ReadonlySet<string>): Promise<void> {
    const c = this.#c
    if (this.#pipeline === undefined && c.options.pipeline !== false && names.length >= c.batchSize)
      this.#pipeline = new Pipeline(c)
    if (this.#pipeline !== undefined) {
      await this.#pipeline.claim(names, regular)
      return
    }
    const held = await claimHere(c, names, regular)
    if (held === undefined) return
    await moveHere(c, held, await commit(c, held))
    // Let signal handlers run between batches: SIGTERM is honoured at a batch boundary.
    await new Promise((r) => setImmediate(r))
    c.passClaimed = true
  }
}
