import { fault } from "../_fault.ts"
import { type Claim, landingKey } from "../ledger/model.ts"
import { checkSameQueue } from "../queue/root.ts"
import type { Delivery, SourcePort } from "../source/port.ts"
import { type Context, type Item, now } from "./context.ts"
import { type Batch, dueBatches, type Intake } from "./intake.ts"
import { KeeperThread } from "./keeper.ts"
import { type Arrival, arrivals, isRecognisable, landClaimed, landedName, toLanding } from "./land.ts"
import { moveHere } from "./move.ts"
import { defaults } from "./options.ts"
import { recoverDeadPeers } from "./recover.ts"
import { countClaimed } from "./summary.ts"

/**
 * A broker as an intake (intake.ts): batch after batch is received, landed as claimed files in
 * processing/, taken by the engine through the same steps as files (decide, commit, move), and
 * only then acknowledged. Ends when a receive waits `idleWaitMs` for nothing (a drain), or,
 * with `untilStopped`, when the run is stopped; the batch in hand is finished and acknowledged.
 * The keeper thread, where the source has one, runs from the intake's start to its close.
 *
 * The protocol of one batch, and what holds after each step:
 * 1. receive: up to a batch of deliveries, unacknowledged: a crash from here to step 6 makes the
 *    source deliver them again.
 * 2. recognise: a delivery whose (landed name, payload hash) has an outcome row under a claim
 *    that landed it (`committedLandings`) was committed before its ack was lost: it is
 *    acknowledged in step 6 with no new row, counted as `redelivered`. Only a delivery whose id
 *    is stable, or that the source flags redelivered, is recognised (see isRecognisable).
 * 3. claim: one transaction claims the batch's names with the source's delivery count as
 *    attempts and writes each origin (`claimLanded`), durable before it returns when the run is
 *    (SQLite commits it at synchronous=FULL; a PostgreSQL commit is): a landed file never
 *    outlives its claim and origins rows, even across a power cut, or recovery would take it for
 *    a new file and the broker's redelivery would be counted a duplicate instead of recognised.
 *    A name held by another live consumer (its earlier delivery still in hand) is handed back, to
 *    come again later.
 * 4. land: each body is written under tmp/ as `<claimId>.land` and renamed no-replace into
 *    processing/, then processing/ is fsynced: as after a file's claim, a file in processing/
 *    has its claim row, and recovery of a dead consumer treats it as any claimed file, and
 *    removes its leftovers in tmp/. A delivery counted `--max-attempts` times or more goes through
 *    steps 3 to 6 alone, before the rest (see takenAlone), so that a crash is pinned on it alone.
 * 5. decide, commit, move: consume/commit.ts and consume/move.ts as for files, deferral through
 *    deferred/ included. After the move the outcome is durable and the file has left processing/.
 * 6. ack: the batch's deliveries are acknowledged; an ack lost here is step 2's next time.
 * A stop before step 3 hands the batch back unacknowledged; once claimed, the batch is finished.
 */
export class SourceIntake implements Intake {
  readonly #c: Context
  readonly #source: SourcePort
  readonly #keeper: KeeperThread | undefined
  /** When recoverDeadPeers last ran (performance.now()); the run's start recovered everything before. */
  #recoveredAt = performance.now()
  /** A batch handed back names another consumer held: maybe one that died since this run started. */
  #isHeldElsewhere = false

  constructor(c: Context, source: SourcePort) {
    this.#c = c
    this.#source = source
    const within = source.keepAliveWithinMs
    this.#keeper =
      source.keeper === undefined || within === undefined
        ? undefined
        : new KeeperThread(source.keeper, keepEveryMs(within), c.log)
    // Started with the run: by the first batch it should be keeping already.
    this.#keeper?.start()
  }

  async *batches(): AsyncGenerator<Batch, void, undefined> {
    const c = this.#c
    const source = this.#source
    const idleWaitMs = c.options.idleWaitMs ?? defaults.idleWaitMs
    let aside: Delivery[] = []
    while (!c.isStopping) {
      // A --source run goes on for as long as the broker has deliveries: its root is checked
      // before each batch as a watch's is before each drain.
      checkSameQueue(c.queue)
      await this.#recoverDeadPeers()
      yield* dueBatches(c, now())
      // Deliveries set aside make a batch already: what has arrived meanwhile joins them, and
      // nothing more is waited for (a wait would cost each batch of them the whole idle wait).
      const waitMs = aside.length > 0 ? 0 : idleWaitMs
      const received = await source.receive(Math.max(1, c.batchSize - aside.length), waitMs, c.options.signal)
      const batch = [...aside, ...received]
      aside = []
      if (c.isStopping) {
        await source.release(batch)
        return
      }
      if (batch.length === 0) {
        if (c.options.untilStopped === true) continue
        return
      }
      aside = yield* this.#take(batch)
    }
    if (aside.length > 0) await source.release(aside)
  }

  async halt(): Promise<void> {}

  /**
   * Between two batches, takes over what consumers that died since this run started left: a
   * second later once a name was handed back as held (the dead one's deliveries come here again,
   * and would be handed back for as long as this run lives), else every quarter lease. Their
   * files are processed from processing/, and the redeliveries then recognised.
   */
  async #recoverDeadPeers(): Promise<void> {
    const c = this.#c
    const every = this.#isHeldElsewhere ? heldRecoveryMs : c.moveGuardMs
    if (performance.now() - this.#recoveredAt < every) return
    this.#isHeldElsewhere = false
    this.#recoveredAt = performance.now()
    await recoverDeadPeers(c)
  }

  async close(): Promise<void> {
    await this.#keeper?.close()
  }

  /**
   * Steps 2 to 4 for one batch, yielded for step 5, and step 6 in its `settle`. Returns the
   * deliveries held back for the next batch: a later delivery of a name that one of this batch
   * lands under (one claim per name at a time).
   */
  async *#take(batch: readonly Delivery[]): AsyncGenerator<Batch, Delivery[], undefined> {
    const c = this.#c
    const source = this.#source
    const keeper = this.#keeper
    const first = new Map<string, Arrival>()
    const aside: Delivery[] = []
    for (const a of arrivals(batch)) {
      if (first.has(a.name)) aside.push(a.delivery)
      else first.set(a.name, a)
    }
    const kept = keepAlive(c, source, batch, keeper)
    try {
      // Before a handler can hold the main thread, the keeper thread must be keeping the batch.
      if (keeper !== undefined && source.keepAliveWithinMs !== undefined)
        await keeper.untilReady(source.keepAliveWithinMs)
      const asked = [...first.values()].filter((a) => isRecognisable(a.delivery))
      const known = await c.ledger.committedLandings(asked.map((a) => ({ name: a.name, payloadHash: a.hash })))
      const recognised = asked.filter((a) => known.has(landingKey(a.name, a.hash)))
      const fresh = [...first.values()].filter((a) => !recognised.includes(a))
      for (const a of recognised)
        c.log.debug("redelivered", { file: a.name, problem: "committed before; acknowledged again, nothing recorded" })
      const groups = takenAlone(c, fresh)
      for (const [k, group] of groups.entries()) {
        // A group once claimed is finished; a stop before the next one hands the rest back.
        if (k > 0 && c.isStopping) return [...aside, ...groups.slice(k).flatMap((g) => g.map((a) => a.delivery))]
        yield await this.#land(group, first, k === 0 ? recognised : [], kept)
      }
      return aside
    } finally {
      kept.stop()
    }
  }

  /** Steps 3 and 4 for one group of a batch, and step 6 in its `settle`, `recognised` acknowledged with it. */
  async #land(
    group: readonly Arrival[],
    first: ReadonlyMap<string, Arrival>,
    recognised: readonly Arrival[],
    kept: KeptAlive,
  ): Promise<Batch> {
    const c = this.#c
    const source = this.#source
    const landings = group.map((a) => toLanding(a, c.poisonAt))
    if (group.length > 0) fault("before-land-claim")
    const taken =
      group.length === 0 ? [] : await c.ledger.claimLanded(c.owner.ownerId, landings, now(), c.moved.splice(0))
    // Recognised after all: another consumer of the root committed the same delivery between the
    // check and this claim (two processes given one pending entry, as a Redis consumer name they
    // share is). Once claimed, no one else can commit it: its claim is given up, and it is
    // acknowledged with nothing recorded, never committed a second time as a duplicate.
    const late = await recognisedLate(c, taken, first)
    if (late.size > 0)
      await c.ledger.release(
        c.owner.ownerId,
        taken.filter((cl) => late.has(cl.name)),
      )
    for (const name of late)
      c.log.debug("redelivered", {
        file: name,
        problem: "committed by another consumer meanwhile; acknowledged again, nothing recorded",
      })
    const claims = late.size === 0 ? taken : taken.filter((cl) => !late.has(cl.name))
    const held = await landClaimed(c, claims, first)
    // A delivery counted poisonAt times is in a group of its own (takenAlone).
    for (const item of held) if (isCounted(c, first.get(item.name) as Arrival)) await countAttempt(c, item)
    const landed = new Set(held.map((i) => i.name))
    const back = group.filter((a) => !landed.has(a.name) && !late.has(a.name)).map((a) => a.delivery)
    if (held.length > 0) countClaimed(c.summary, c.log, held)
    return {
      held,
      settle: async (committedAt) => {
        if (held.length > 0) await moveHere(c, held, committedAt as number)
        const acked = group.filter((a) => landed.has(a.name) || late.has(a.name))
        await source.ack([...recognised, ...acked].map((a) => a.delivery))
        c.summary.redelivered += recognised.length + late.size
        // Another consumer holds their names: their earlier delivery is in its hands. Not sooner than its lease's heartbeat.
        for (const d of back)
          c.log.debug("handed-back", {
            file: landedName(d),
            problem: "another consumer holds this name; it comes again later",
          })
        if (back.length > 0) {
          this.#isHeldElsewhere = true
          await source.release(back, c.moveGuardMs)
        }
        // No longer in hand: kept alive, a delivery handed back with a delay would wait longer.
        kept.forget(group.map((a) => a.delivery))
      },
    }
  }
}

/**
 * The names of `claims` whose delivery has an outcome by now (see committedLandings). Only one the
 * source delivered before is asked about: no other consumer can have been handed a first
 * delivery, so a batch of them costs no second query.
 */
async function recognisedLate(
  c: Context,
  claims: readonly Claim[],
  first: ReadonlyMap<string, Arrival>,
): Promise<Set<string>> {
  const asked = claims.map((cl) => first.get(cl.name) as Arrival).filter((a) => a.delivery.redelivered)
  if (asked.length === 0) return new Set()
  const known = await c.ledger.committedLandings(asked.map((a) => ({ name: a.name, payloadHash: a.hash })))
  return new Set(asked.filter((a) => known.has(landingKey(a.name, a.hash))).map((a) => a.name))
}

/** How soon after a name was handed back as held the claims are looked at for a dead holder. */
const heldRecoveryMs = 1000

/**
 * The batch's fresh deliveries in the groups they are landed and committed in: each one the source
 * has counted `poisonAt` times or more alone and first, in the order received, then the rest
 * together. Such a delivery was in hand at that many deaths (or hand-backs), but its count cannot
 * say whether it killed them or only sat in a batch that something else killed. Alone, a death is
 * its own (countAttempt), and recovery then refuses it as poison; otherwise it is judged as any
 * other, and its batch-mates are never made poison by a kill that was not theirs. Always at least
 * one group, so that a batch recognised whole is still acknowledged.
 */
function takenAlone(c: Context, fresh: readonly Arrival[]): Arrival[][] {
  const alone = fresh.filter((a) => isCounted(c, a)).map((a) => [a])
  const rest = fresh.filter((a) => !isCounted(c, a))
  return [...alone, ...(rest.length > 0 || alone.length === 0 ? [rest] : [])]
}

/** Whether the source has counted the delivery `poisonAt` times or more. */
function isCounted(c: Context, a: Arrival): boolean {
  return (a.delivery.deliveryCount ?? 1) >= c.poisonAt
}

/**
 * Counts the last attempt of a delivery landed alone, as recovery counts a file's (retryAlone):
 * once the validator is loaded and the body in hand, neither of which can be the delivery's fault,
 * and just before it is judged. A death from here on is pinned on it, and makes it poison; a clean
 * failure of the database hands it back uncounted (hand-back.ts).
 */
async function countAttempt(c: Context, item: Item): Promise<void> {
  c.log.info("taken-alone", {
    file: item.name,
    attempts: item.attempts + 1,
    problem:
      "delivered at least this many times without being acknowledged; judged on its own, so that a crash is pinned on it",
  })
  // Refused unread: nothing will judge it.
  if (item.outcome !== undefined) return
  await c.decider.load()
  fault("before-attempt")
  await c.ledger.startAttempt(item, c.owner.ownerId)
  item.isAttempted = true
}

/** The keep-alive of a batch in hand: `forget` what has left the hand, `stop` once the batch is done. */
interface KeptAlive {
  forget(deliveries: readonly Delivery[]): void
  stop(): void
}

/**
 * Keeps a batch's deliveries this consumer's while they are in hand, well within the source's
 * window: from the keeper thread where the source has one (a synchronous handler or commit
 * holding the main thread cannot stop it), and from a timer here whenever that thread is not
 * keeping (not started yet, failed, or no keeper at all).
 */
function keepAlive(
  c: Context,
  source: SourcePort,
  batch: readonly Delivery[],
  keeper: KeeperThread | undefined,
): KeptAlive {
  const within = source.keepAliveWithinMs
  if (within === undefined) return { forget: () => {}, stop: () => {} }
  let inHand = [...batch]
  let held = keeper?.hold(inHand)
  const timer = setInterval(() => {
    if (inHand.length === 0 || (held !== undefined && keeper?.isKeeping === true)) return
    source.keepAlive(inHand).catch((error: unknown) => {
      c.log.warn("keep-alive-failed", { error: error instanceof Error ? error.message : String(error) })
    })
  }, keepEveryMs(within))
  return {
    forget(deliveries) {
      const gone = new Set(deliveries)
      inHand = inHand.filter((d) => !gone.has(d))
      keeper?.drop(held)
      held = inHand.length > 0 ? keeper?.hold(inHand) : undefined
    },
    stop() {
      clearInterval(timer)
      keeper?.drop(held)
    },
  }
}

/** Three keep-alives per window: one lost or late still leaves the delivery in hand. */
function keepEveryMs(withinMs: number): number {
  return Math.max(50, withinMs / 3)
}
