import type { AnyEffect } from "../ledger/port.ts"
import type { Message } from "../message/validate.ts"
import { holdOwner } from "../queue/owner.ts"
import { checkSameQueue } from "../queue/root.ts"
import { commit } from "./commit.ts"
import { Context, now } from "./context.ts"
import { DirectoryIntake } from "./directory.ts"
import { handBack, withLeftovers } from "./hand-back.ts"
import { Heartbeat } from "./heartbeat.ts"
import type { Intake } from "./intake.ts"
import type { ConsumeOptions } from "./options.ts"
import { recover } from "./recover.ts"
import { SourceIntake } from "./source-loop.ts"
import type { ConsumeSummary } from "./summary.ts"

/**
 * Drains a source once: recovers abandoned claims, then takes batch after batch from the
 * source's intake (intake.ts), decides and commits each here, and has the intake move it out and
 * acknowledge it, until the source is drained. The directory queue's intake (directory.ts) claims
 * inbox/ files until a full pass over inbox/ claims nothing; a broker's (source-loop.ts, with its
 * own steps) lands deliveries as claimed files and acknowledges them after the move.
 *
 * The delivery protocol, for a file, and what is durable after each step:
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
  // Every run (each drain of a watch, each library drain) first makes sure its root is still
  // the one openQueue checked (checkSameQueue says why).
  checkSameQueue(options.queue)
  const engine = new Engine(options as unknown as ConsumeOptions<T>)
  return engine.run()
}

/** One consume run: recovery, then batch after batch from its intake, each step done by its own module. */
class Engine {
  readonly #c: Context

  constructor(options: ConsumeOptions) {
    this.#c = new Context(options)
  }

  async run(): Promise<ConsumeSummary> {
    const c = this.#c
    const release = holdOwner(c.owner.ownerId)
    const heartbeat = new Heartbeat(c)
    let intake: Intake | undefined
    try {
      await c.ledger.registerConsumer(c.owner, now())
      await recover(c)
      intake = c.options.source === undefined ? new DirectoryIntake(c) : new SourceIntake(c, c.options.source)
      for await (const batch of intake.batches()) {
        // Steps 2 and 3: decided and committed here, whatever the source; then the intake's move and ack.
        await batch.settle(batch.held.length === 0 ? undefined : await commit(c, batch.held))
        // Let signal handlers run between batches: SIGTERM is honoured at a batch boundary.
        await new Promise((r) => setImmediate(r))
      }
      await c.ledger.unregisterConsumer(c.owner.ownerId)
    } catch (error) {
      throw withLeftovers(error, await handBack(c, intake), c.queue.processing)
    } finally {
      await heartbeat.stop()
      await intake?.close()
      c.close()
      release()
    }
    return c.summary
  }
}
