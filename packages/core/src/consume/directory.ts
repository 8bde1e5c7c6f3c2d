import { judgeEntry } from "../queue/root.ts"
import { scanDir } from "../queue/scan.ts"
import { claimHere, renameUndecodable } from "./claim.ts"
import { type Context, type Item, now } from "./context.ts"
import { type Batch, dueBatches, type Intake, movedHere } from "./intake.ts"
import { Pipeline } from "./pipeline.ts"

/**
 * The directory queue as an intake: passes over inbox/, each claiming batch after batch, until a
 * whole pass claims nothing. A claim is a ledger transaction recording (name, claim_id, owner)
 * for a batch of names; only then is each file renamed inbox/ -> processing/ (no-replace) and
 * processing/ fsynced, so a file in processing/ always has a claim row naming its owner. Once a
 * pass claims a full batch (with the pipeline on) the renames, reads and moves out go to the
 * I/O thread (pipeline.ts), batch k+1 claimed while the engine commits batch k.
 */
export class DirectoryIntake implements Intake {
  readonly #c: Context
  /** The second thread's pipeline, once a pass has claimed a full batch (with the pipeline on). */
  #pipeline: Pipeline | undefined

  constructor(c: Context) {
    this.#c = c
  }

  async *batches(): AsyncGenerator<Batch, void, undefined> {
    const c = this.#c
    while (!c.isStopping) {
      c.passClaimed = false
      yield* this.#pass()
      if (!c.passClaimed) return
    }
  }

  async halt(): Promise<void> {
    await this.#pipeline?.halt()
  }

  async close(): Promise<void> {
    this.#pipeline?.close()
  }

  /** One pass over inbox/, the deferred files due at its start first. */
  async *#pass(): AsyncGenerator<Batch, void, undefined> {
    const c = this.#c
    const names: string[] = []
    const regular = new Set<string>()
    const passStart = Date.now()
    let hasUndecodable = false
    let deferred = 0
    // Due times are written by spool's clock (now()); file ages below are the kernel's mtimes.
    yield* dueBatches(c, now(), () => this.#finishPipeline())
    for (const e of scanDir(c.queue.inbox, 1024)) {
      const fate = judgeEntry(c.queue.inbox, e.name, c.minAgeMs, passStart)
      // An undecodable name is renamed to its %XX spelling below, and taken in the next pass.
      if (fate === "undecodable") hasUndecodable = true
      else if (fate === "too-young") deferred++
      if (fate !== "take") continue
      names.push(e.name)
      if (e.isFile()) regular.add(e.name)
      if (names.length < c.batchSize) continue
      yield* this.#claim(names, regular)
      names.length = 0
      regular.clear()
      if (c.isStopping) break
    }
    if (names.length > 0 && !c.isStopping) yield* this.#claim(names, regular)
    yield* this.#finishPipeline()
    if (hasUndecodable && !c.isStopping && renameUndecodable(c) > 0) c.passClaimed = true
    c.summary.tooYoung = deferred + c.youngOrphans
  }

  /** Claims a batch of inbox/ names: through the pipeline once it runs, else on this thread. */
  async *#claim(names: readonly string[], regular: ReadonlySet<string>): AsyncGenerator<Batch, void, undefined> {
    const c = this.#c
    if (this.#pipeline === undefined && c.options.pipeline !== false && names.length >= c.batchSize)
      this.#pipeline = new Pipeline(c)
    const pipeline = this.#pipeline
    const held = pipeline === undefined ? await claimHere(c, names, regular) : await pipeline.claim(names, regular)
    if (held === undefined) return
    c.passClaimed = true
    yield pipeline === undefined ? movedHere(c, held) : this.#pipelined(pipeline, held)
  }

  /** The batch the pipeline holds, taken in and committed; then every move out it was given, completed. */
  async *#finishPipeline(): AsyncGenerator<Batch, void, undefined> {
    const pipeline = this.#pipeline
    if (pipeline === undefined) return
    const held = await pipeline.last()
    if (held !== undefined) {
      this.#c.passClaimed = true
      yield this.#pipelined(pipeline, held)
    }
    await pipeline.settle()
  }

  #pipelined(pipeline: Pipeline, held: readonly Item[]): Batch {
    return { held, settle: (committedAt) => pipeline.moveOut(held, committedAt as number) }
  }
}
