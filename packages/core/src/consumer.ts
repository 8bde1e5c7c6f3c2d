import fs from "node:fs"
import { join } from "node:path"
import { fault } from "./_fault.ts"
import { workDone } from "./collect.ts"
import type { Item } from "./consume/context.ts"
import { Decider } from "./consume/decide.ts"
import { type ConsumeOptions, defaults } from "./consume/options.ts"
import { type ConsumeSummary, countClaimed, countVerdict, emptySummary } from "./consume/summary.ts"
import { SpoolError } from "./errors.ts"
import { fsyncDir, type OpenDir, openDir, renameNoReplace, renameNoReplaceAt } from "./files.ts"
import { type ClaimInReply, hashAt, InStatus, IoError, IoThread, type MoveOut, type MoveOutReply } from "./io-thread.ts"
import type { Claim, ClaimRow, Outcome, Verdict } from "./ledger.ts"
import type { LedgerPort } from "./ledger-port.ts"
import { type Log, silentLog } from "./log.ts"
import type { Message } from "./message.ts"
import { alternateName, escapeUndecodable, fitsNameMax, quoteName } from "./names.ts"
import { currentOwner, type Owner, ownerLiveness } from "./owner.ts"
import { isMessageName, judgeEntry, moveFinished, type Queue, scanDir } from "./queue.ts"

/** A batch claimed and handed to the I/O thread, not yet judged. */
interface Claimed {
  readonly items: Item[]
  readonly reply: Promise<ClaimInReply>
}

/** A committed batch whose move out of processing/ the I/O thread is doing. */
interface Moving {
  readonly items: Item[]
  readonly done: Promise<void>
  reply?: MoveOutReply
  error?: unknown
}

type QueueDirName = "inbox" | "processing" | "done" | "error"

/**
 * Drains inbox/ once: recovers abandoned claims, then claims, processes, commits and moves
 * batch after batch until a full pass over inbox/ claims nothing.
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
export async function consume<T extends Message = Message>(options: ConsumeOptions<T>): Promise<ConsumeSummary> {
  const engine = new Engine(options)
  return engine.run()
}

class Engine<T extends Message> {
  readonly #o: ConsumeOptions<T>
  readonly #q: Queue
  readonly #ledger: LedgerPort
  readonly #log: Log
  readonly #owner: Owner = currentOwner()
  readonly #batchSize: number
  readonly #maxAttempts: number
  readonly #maxBytes: number
  readonly #minAgeMs: number
  readonly #durable: boolean
  readonly #decider: Decider
  /** Items this run has claimed and not yet moved out of processing/. */
  readonly #inHand = new Set<Item>()
  /** Committed claims whose files have durably left processing/: forgotten at the next claim. */
  readonly #moved: Claim[] = []
  /** The I/O thread, once a pass has claimed a full batch (with the pipeline on). */
  #io: IoThread | undefined
  /** The batch the I/O thread is claiming into processing/, judged once the next one is claimed. */
  #claimed: Claimed | undefined
  /** Committed batches being moved out, oldest first. */
  readonly #moving: Moving[] = []
  /** Whether the current pass has claimed anything. */
  #passClaimed = false
  /** Orphans recovery left in processing/ for being younger than minAgeMs; they count as deferred. */
  #youngOrphans = 0
  /**
   * The share of a batch's files the I/O thread reads; this thread reads the rest. Renames
   * cost more or less depending on the filesystem and the directories' sizes, so the share
   * follows the load: down when this thread had to wait for the I/O thread, up when not.
   */
  #readShare = 1
  readonly #dirFds: { inbox: number; processing: number; done: number; error: number }
  readonly #openDirs: Record<QueueDirName, OpenDir>
  readonly summary: ConsumeSummary = emptySummary()

  constructor(o: ConsumeOptions<T>) {
    this.#o = o
    this.#q = o.queue
    this.#ledger = o.ledger
    this.#log = o.log ?? silentLog
    this.#batchSize = Math.max(1, o.batchSize ?? defaults.batchSize)
    this.#maxAttempts = Math.max(1, o.maxAttempts ?? defaults.maxAttempts)
    this.#maxBytes = o.maxBytes ?? defaults.maxBytes
    this.#minAgeMs = o.minAgeMs ?? defaults.minAgeMs
    this.#durable = o.durable ?? true
    this.#dirFds = {
      inbox: openDir(this.#q.inbox),
      processing: openDir(this.#q.processing),
      done: openDir(this.#q.done),
      error: openDir(this.#q.error),
    }
    const at = (d: QueueDirName): OpenDir => ({ path: this.#q[d], fd: this.#dirFds[d] })
    this.#openDirs = { inbox: at("inbox"), processing: at("processing"), done: at("done"), error: at("error") }
    this.#decider = new Decider(o.type, this.#openDirs.processing, this.#q.error, this.#maxBytes)
  }

  get #isStopping(): boolean {
    return this.#o.signal?.aborted === true
  }

  async run(): Promise<ConsumeSummary> {
    await this.#ledger.registerConsumer(this.#owner, now())
    // The heartbeat is this consumer's lease as other hosts (and other pid namespaces) see it.
    // Every claim refreshes it; this refreshes it while a long batch is in hand too (a slow
    // effect, a stalled file system), whenever this thread is waiting. A consumer that still
    // loses its claims (stopped for longer than the lease) finds them fenced at its commit.
    const lease = this.#o.leaseMs ?? defaults.leaseMs
    const beat = setInterval(() => void this.#heartbeat(), Math.max(10, lease / 4))
    beat.unref()
    try {
      await this.#recover()
      while (!this.#isStopping) {
        const claimedAny = await this.#pass()
        if (!claimedAny) break
      }
      await this.#ledger.unregisterConsumer(this.#owner.ownerId)
    } catch (error) {
      throw withLeftovers(error, await this.#handBack(), this.#q.processing)
    } finally {
      clearInterval(beat)
      await this.#beating
      this.#io?.close()
      for (const fd of Object.values(this.#dirFds)) fs.closeSync(fd)
    }
    return this.summary
  }

  /** The heartbeat in flight, if any: one at a time, and awaited before the run ends. */
  #beating: Promise<void> | undefined

  async #heartbeat(): Promise<void> {
    if (this.#beating !== undefined) return
    this.#beating = (async () => {
      try {
        await this.#ledger.flush(this.#owner.ownerId, now())
      } catch (error) {
        this.#log.warn("heartbeat", {
          problem: `cannot refresh this consumer's heartbeat: ${error instanceof Error ? error.message : String(error)}`,
        })
      }
    })()
    await this.#beating
    this.#beating = undefined
  }

  /**
   * After a fatal error (disk full, ledger gone read-only) leave as little as possible in
   * processing/: committed files go on to done/ or error/, the rest back to inbox/. What cannot
   * be done here waits in processing/ with its claim, and recovery finishes it on the next
   * start. Returns how many of this run's files wait so.
   */
  async #handBack(): Promise<number> {
    if (this.#io !== undefined) {
      // Let the I/O thread finish what it was asked to do, then learn where those files are.
      await this.#io.idle()
      const claimed = this.#claimed
      this.#claimed = undefined
      if (claimed !== undefined)
        try {
          markInProcessing(claimed.items, (await claimed.reply).status)
        } catch (error) {
          markInProcessing(claimed.items, error instanceof IoError ? error.status : undefined)
        }
      try {
        await this.#settleMoves(true)
      } catch {}
    }
    let isFlushed = false
    try {
      // #retryAlone's commits are not yet durable: no committed file moves before they are.
      await this.#ledger.flush(this.#owner.ownerId, now())
      isFlushed = true
    } catch {}
    let left = 0
    for (const item of this.#inHand)
      try {
        if (!(await this.#handBackOne(item, isFlushed))) left++
      } catch {
        left++
      }
    this.#inHand.clear()
    try {
      this.#sync("inbox", "processing", "done", "error")
    } catch {}
    return left
  }

  /** Hands one file back; false if it stays in processing/ for recovery. */
  async #handBackOne(item: Item, isFlushed: boolean): Promise<boolean> {
    const o = item.committed ? item.outcome : undefined
    if (o !== undefined) {
      const dest = destOf(o, item.verdict)
      // No destination: a claim lost or a file vanished, not this consumer's to move.
      if (dest === undefined) return true
      return isFlushed && (await this.#moveOut(o.name, dest, o.kind === "rejected" ? o.destName : o.name, o.claimId))
    }
    if (item.inProcessing !== true) return item.inProcessing === false
    // A commit that failed over the network may still have committed: only recovery, which
    // reads the claim's state, can tell.
    if (this.#ledger.backend === "postgres") return false
    // The claim first, and only while it is still this consumer's: a claim taken over while
    // this one was stalled is its adopter's file now. A release the failing ledger refuses
    // (locked, disk full) still sends the file back: its claim row then names a file in inbox/,
    // which recovery simply forgets, and the file is claimed afresh, its attempts at 1 (kept
    // in processing/, every restart that fails the same way would count one against it).
    let released: number | undefined
    try {
      released = await this.#ledger.release(this.#owner.ownerId, [item])
    } catch {}
    if (released === 0) return true
    return renameNoReplace(join(this.#q.processing, item.name), join(this.#q.inbox, item.name)) === "moved"
  }

  /** One pass over inbox/: claims and finishes batches; true if it claimed anything. */
  async #pass(): Promise<boolean> {
    this.#passClaimed = false
    const names: string[] = []
    const regular = new Set<string>()
    const passStart = Date.now()
    let hasUndecodable = false
    let deferred = 0
    for (const e of scanDir(this.#q.inbox, 1024)) {
      const fate = judgeEntry(this.#q.inbox, e.name, this.#minAgeMs, passStart)
      // An undecodable name is renamed to its %XX spelling below, and taken in the next pass.
      if (fate === "undecodable") hasUndecodable = true
      else if (fate === "too-young") deferred++
      if (fate !== "take") continue
      names.push(e.name)
      if (e.isFile()) regular.add(e.name)
      if (names.length < this.#batchSize) continue
      await this.#claimBatch(names, regular)
      names.length = 0
      regular.clear()
      if (this.#isStopping) break
    }
    if (names.length > 0 && !this.#isStopping) await this.#claimBatch(names, regular)
    await this.#drain()
    if (hasUndecodable && !this.#isStopping && this.#renameUndecodable() > 0) this.#passClaimed = true
    this.summary.deferred = deferred + this.#youngOrphans
    return this.#passClaimed
  }

  async #claimBatch(names: readonly string[], regular: ReadonlySet<string>): Promise<void> {
    if (this.#io === undefined && this.#o.pipeline !== false && names.length >= this.#batchSize)
      this.#io = new IoThread({
        dirs: { inbox: this.#q.inbox, processing: this.#q.processing, done: this.#q.done, error: this.#q.error },
        durable: this.#durable,
        maxBytes: this.#maxBytes,
      })
    if (this.#io !== undefined) await this.#claimPipelined(this.#io, names, regular)
    else if (await this.#claimAndProcess(names, regular)) this.#passClaimed = true
  }

  /**
   * The pipelined protocol, for one batch: claim it (the same transaction forgets the claims
   * whose moves have finished), hand its renames into processing/ and its reads to the I/O
   * thread, and meanwhile judge, commit and hand over the moves of the batch claimed before.
   * Every step of the protocol keeps its order for each batch; only different batches overlap.
   */
  async #claimPipelined(io: IoThread, names: readonly string[], regular: ReadonlySet<string>): Promise<void> {
    await this.#settleMoves(false)
    const claims = await this.#ledger.claim(this.#owner.ownerId, names, now(), this.#moved.splice(0))
    let batch: Claimed | undefined
    if (claims.length > 0) {
      const items: Item[] = claims.map((c) => ({ ...c, isRegular: regular.has(c.name) }))
      for (const item of items) this.#inHand.add(item)
      const reply = io.claimIn(
        items.map((i) => i.name),
        Uint8Array.from(items, (i) => (i.isRegular ? 1 : 0)),
        Math.round(this.#readShare * items.length),
        this.#o.readAheadBytes ?? defaults.readAheadBytes,
      )
      reply.catch(() => {}) // awaited when the batch is judged, or by #handBack
      batch = { items, reply }
    }
    const previous = this.#claimed
    this.#claimed = batch
    if (previous !== undefined) await this.#judgeClaimed(io, previous)
    // Let signal handlers run between batches: SIGTERM is honoured at a batch boundary.
    await new Promise((r) => setImmediate(r))
  }

  /** Finishes the pipeline: judges the last claimed batch and waits for every move out. */
  async #drain(): Promise<void> {
    const last = this.#claimed
    this.#claimed = undefined
    if (last !== undefined && this.#io !== undefined) await this.#judgeClaimed(this.#io, last)
    await this.#settleMoves(true)
  }

  /** Judges and commits a batch the I/O thread has claimed, then hands it its moves out. */
  async #judgeClaimed(io: IoThread, { items, reply }: Claimed): Promise<void> {
    let r: ClaimInReply
    try {
      const waitedFrom = performance.now()
      r = await reply
      const waited = performance.now() - waitedFrom > 0.5
      this.#readShare = Math.min(1, Math.max(0, this.#readShare + (waited ? -0.1 : 0.05)))
    } catch (error) {
      markInProcessing(items, error instanceof IoError ? error.status : undefined)
      throw error
    }
    markInProcessing(items, r.status)
    const held: Item[] = []
    const gone: Item[] = []
    for (const [i, item] of items.entries()) {
      if (item.inProcessing) {
        held.push(item)
        const offset = r.spans[2 * i] as number
        if (offset >= 0) {
          item.read = { ok: true, bytes: new Uint8Array(r.data, offset, r.spans[2 * i + 1]) }
          item.hash = hashAt(r, i)
        }
        continue
      }
      this.#inHand.delete(item)
      if (r.status[i] === InStatus.exists) this.#warnStray(item.name)
      gone.push(item)
    }
    for (const [i, reason, detail] of r.rejects) (items[i] as Item).read = { ok: false, reason, detail }
    await this.#ledger.release(this.#owner.ownerId, gone)
    if (held.length === 0) return
    this.#passClaimed = true
    fault("after-claim")
    countClaimed(this.summary, this.#log, held)
    await this.#commit(held)
    const leaving: Item[] = []
    const moves: MoveOut[] = []
    for (const item of held) {
      const o = item.outcome as Outcome
      countVerdict(this.summary, this.#log, o, item.verdict as Verdict)
      const dest = destOf(o, item.verdict)
      if (dest === undefined) {
        this.#inHand.delete(item)
        continue
      }
      leaving.push(item)
      moves.push([o.name, dest, o.kind === "rejected" ? o.destName : o.name])
    }
    const moving: Moving = {
      items: leaving,
      done: io.moveOut(moves).then(
        (reply) => {
          moving.reply = reply
        },
        (error: unknown) => {
          moving.error = error
        },
      ),
    }
    this.#moving.push(moving)
  }

  /**
   * Completes the batches whose moves out have finished, oldest first (all of them, waiting,
   * when `wait`): records a renamed failure, and queues the claims to be forgotten.
   */
  async #settleMoves(wait: boolean): Promise<void> {
    for (let m = this.#moving[0]; m !== undefined; m = this.#moving[0]) {
      if (m.reply === undefined && m.error === undefined) {
        if (!wait) return
        await m.done
      }
      this.#moving.shift()
      if (m.error !== undefined) throw m.error
      for (const [i, to] of m.reply?.renamed ?? []) await this.#ledger.renameFailure((m.items[i] as Item).claimId, to)
      for (const i of m.reply?.missing ?? []) {
        const item = m.items[i] as Item
        await this.#notThereToMove(item.name, item.claimId, destOf(item.outcome as Outcome, item.verdict) ?? "done")
      }
      this.#movedOut(m.items)
    }
  }

  /**
   * Gives every inbox/ entry whose name is not valid UTF-8 a UTF-8 name, each invalid byte
   * written as %XX (`a\xff.json` -> `a%FF.json`), by a no-replace rename inside inbox/; the
   * file is then consumed like any other. The ledger and reports hold names as text, so a
   * name without an exact text spelling could not be claimed, moved or reported.
   */
  #renameUndecodable(): number {
    let renamed = 0
    let raws: Buffer[]
    try {
      raws = fs.readdirSync(this.#q.inbox, { encoding: "buffer" })
    } catch {
      return 0
    }
    for (const raw of raws) {
      const name = escapeUndecodable(raw)
      if (name === undefined || !isMessageName(name)) continue
      const from = Buffer.concat([Buffer.from(`${this.#q.inbox}/`), raw])
      // A name too long in its %XX spelling starts at name~1.json, shortened to fit.
      for (let k = fitsNameMax(name) ? 0 : 1; ; k++) {
        const to = k === 0 ? name : alternateName(name, k)
        let r: ReturnType<typeof renameNoReplace>
        try {
          r = renameNoReplace(from, join(this.#q.inbox, to))
        } catch (error) {
          this.#log.warn("undecodable-name", { file: name, problem: `cannot rename it: ${String(error)}` })
          break
        }
        if (r === "exists") continue
        if (r === "moved") {
          renamed++
          this.#log.warn("renamed", { file: to, problem: "its name was not valid UTF-8; bad bytes are now %XX" })
        }
        break
      }
    }
    if (renamed > 0) this.#sync("inbox")
    return renamed
  }

  async #claimAndProcess(names: readonly string[], regular: ReadonlySet<string>): Promise<boolean> {
    const claims = await this.#ledger.claim(this.#owner.ownerId, names, now(), this.#moved.splice(0))
    if (claims.length === 0) return false
    const held: Item[] = []
    const gone: Claim[] = []
    for (const c of claims) {
      const moved = this.#renameAt("inbox", c.name, "processing", c.name)
      if (moved === "moved") held.push({ ...c, isRegular: regular.has(c.name), inProcessing: true })
      else {
        if (moved === "exists") this.#warnStray(c.name)
        gone.push(c)
      }
    }
    for (const item of held) this.#inHand.add(item)
    await this.#ledger.release(this.#owner.ownerId, gone)
    if (held.length === 0) return false
    this.#sync("inbox", "processing")
    fault("after-claim")
    countClaimed(this.summary, this.#log, held)
    await this.#finish(held)
    // Let signal handlers run between batches: SIGTERM is honoured at a batch boundary.
    await new Promise((r) => setImmediate(r))
    return true
  }

  #warnStray(name: string): void {
    this.#log.warn("stray-file", {
      file: name,
      problem:
        "processing/ already holds a file of this name with no claim; it is left in inbox/ until recovery takes the other one",
    })
  }

  /** Decides, commits and moves a batch of items that are in processing/. */
  async #finish(items: Item[]): Promise<void> {
    await this.#commit(items)
    await this.#moveAll(items)
  }

  /** Decides each item and commits the batch's outcomes in one transaction. */
  async #commit(items: readonly Item[]): Promise<void> {
    await this.#decider.load()
    for (const item of items) item.outcome = this.#decider.decide(item)
    const outcomes = items.map((i) => i.outcome as Outcome)
    const verdicts = await this.#ledger.commit(this.#owner.ownerId, outcomes, now(), this.#o.effect)
    for (const [i, item] of items.entries()) {
      item.committed = true
      item.verdict = verdicts[i] as Verdict
    }
    fault("after-commit")
  }

  /** Moves committed items out of processing/ (the acknowledgement) and makes the moves durable. */
  async #moveAll(all: readonly Item[]): Promise<void> {
    let toDone = false
    let toError = false
    const items: Item[] = []
    for (const item of all) {
      const o = item.outcome as Outcome
      const verdict = item.verdict as Verdict
      countVerdict(this.summary, this.#log, o, verdict)
      const dest = destOf(o, verdict)
      if (dest === undefined) {
        this.#inHand.delete(item)
        continue
      }
      items.push(item)
      if (!(await this.#moveOut(o.name, dest, o.kind === "rejected" ? o.destName : o.name, o.claimId)))
        await this.#notThereToMove(o.name, o.claimId, dest)
      else if (dest === "done") toDone = true
      else toError = true
    }
    // A directory no file entered has nothing to make durable: its fsync would be a no-op.
    if (toDone && toError) this.#sync("processing", "done", "error")
    else if (toDone || toError) this.#sync("processing", toError ? "error" : "done")
    this.#movedOut(items)
  }

  /** A batch has durably left processing/: its claims go at the next claim, and it counts. */
  #movedOut(items: readonly Item[]): void {
    this.#moved.push(...items)
    for (const item of items) this.#inHand.delete(item)
    fault("after-move")
    this.summary.batches++
    workDone(items.length)
    this.#o.onBatch?.(this.summary)
  }

  /** Moves a committed file out of processing/, never replacing anything; false if it is not there. */
  async #moveOut(name: string, dest: "done" | "error", preferred: string, claimId: string): Promise<boolean> {
    const to = moveFinished(this.#openDirs.processing, name, this.#openDirs[dest], preferred)
    if (to === undefined) return false
    if (dest === "error" && to !== preferred) await this.#ledger.renameFailure(claimId, to)
    return true
  }

  /**
   * A file this consumer committed was gone from processing/ when it came to move it. If its
   * claim was taken over meanwhile (this consumer stalled for longer than the lease, and
   * another one judged it dead), the other consumer has moved the file in its recovery: the
   * outcome stands, and nothing is wrong with the queue. If the claim is still this
   * consumer's, something outside spool removed the file, and the run fails.
   */
  async #notThereToMove(name: string, claimId: string, dest: "done" | "error"): Promise<void> {
    if (await this.#ledger.holdsClaim(name, claimId, this.#owner.ownerId))
      throw new SpoolError(
        "io",
        `${quoteName(join(this.#q.processing, name))} vanished before it could be moved to ${this.#q[dest]}/ (its claim is still this consumer's: something outside spool removed it)`,
      )
    this.#log.warn("moved-by-other", {
      file: name,
      problem: `committed here, but the claim was taken over while this consumer was stalled; the consumer that took it over moved the file to ${dest}/`,
    })
  }

  /** A no-replace rename between two queue directories, through the descriptors held open. */
  #renameAt(from: QueueDirName, name: string, to: QueueDirName, newName: string) {
    return renameNoReplaceAt(this.#openDirs[from], name, this.#openDirs[to], newName)
  }

  #sync(...dirs: QueueDirName[]): void {
    if (!this.#durable) return
    for (const d of dirs) fsyncDir(this.#dirFds[d])
  }

  // ---- recovery ------------------------------------------------------------------------

  /**
   * Takes back what dead consumers left. A committed claim only lacks its move: the file is
   * moved on, never processed again, so it is never counted as a duplicate. A claimed file
   * still in processing/ is processed again, alone (see #retryAlone). A claimed file never
   * renamed is simply forgotten: it is still in inbox/. Orphans in processing/ (no claim row,
   * e.g. after a ledger restore) are claimed afresh and processed as a batch, by the rules of
   * inbox/ (judgeEntry): what those leave in inbox/, recovery leaves in processing/.
   */
  async #recover(): Promise<void> {
    const me = this.#owner.ownerId
    const dead = (await this.#ledger.listClaims()).filter((r) => r.ownerId !== me && !this.#isOwnerAlive(r))
    const finished: ClaimRow[] = []
    const retry: Item[] = []
    for (const row of await this.#ledger.adoptClaims(dead, me)) {
      const inProcessing = exists(join(this.#q.processing, row.name))
      if (row.state === "claimed" && inProcessing) {
        retry.push({ name: row.name, claimId: row.claimId, attempts: row.attempts, inProcessing: true })
        continue
      }
      // A file gone by the time it is moved was moved by its owner after all: a consumer that
      // was only stalled, not dead, resuming between the listing and the move.
      if (
        row.state === "committed" &&
        inProcessing &&
        (await this.#moveOut(row.name, row.dest ?? "done", row.destName ?? row.name, row.claimId))
      ) {
        this.#log.warn("recovered", { file: row.name, step: "committed, not yet moved", dest: row.dest })
        this.summary.recovered++
      }
      finished.push(row)
    }
    if (finished.length > 0) {
      // The moves must be on disk before the rows that explain them are forgotten.
      this.#sync("processing", "done", "error")
      await this.#ledger.dropClaims(finished)
    }
    for (const item of retry)
      this.#log.warn("recovered", { file: item.name, step: "claimed, not committed", attempts: item.attempts })
    this.summary.recovered += retry.length
    await this.#retryAlone(retry)

    // Read the claims before the directory: a file that appears in processing/ meanwhile had
    // its claim row committed first, so claimOrphan's insert will conflict and skip it.
    const claimed = new Set((await this.#ledger.listClaims()).map((r) => r.name))
    const orphans: Item[] = []
    const left: string[] = []
    const scanStart = Date.now()
    for (const e of scanDir(this.#q.processing)) {
      if (claimed.has(e.name)) continue
      // An orphan is taken by the inbox/ rules: what they leave in inbox/ stays here.
      const fate = judgeEntry(this.#q.processing, e.name, this.#minAgeMs, scanStart)
      if (fate === "too-young") this.#youngOrphans++
      else if (fate !== "take") left.push(e.name)
      if (fate !== "take") continue
      const c = await this.#ledger.claimOrphan(e.name, me, now())
      if (!c) continue
      if (!exists(join(this.#q.processing, e.name))) {
        // Finished by its owner between our listing and our claim.
        await this.#ledger.dropClaims([c])
        continue
      }
      this.#log.warn("recovered", { file: e.name, step: "orphan in processing/ with no claim" })
      this.summary.recovered++
      orphans.push({ ...c, inProcessing: true, isRegular: e.isFile() })
    }
    this.#noteLeftInProcessing(left)
    for (let i = 0; i < orphans.length; i += this.#batchSize) {
      const batch = orphans.slice(i, i + this.#batchSize)
      for (const item of batch) this.#inHand.add(item)
      countClaimed(this.summary, this.#log, batch)
      await this.#finish(batch)
    }

    // The rows of consumers that died without unregistering (killed, or the machine rebooted),
    // now that their claims are taken: one per killed run, which a consumer started by cron
    // would otherwise leave forever. Only an owner this host can prove dead: one on another
    // host whose heartbeat is merely old may be slow, and a claim naming an owner without a
    // row counts as abandoned. The ledger keeps any row that still holds a claim.
    const gone = (await this.#ledger.listConsumers()).filter((o) => o.ownerId !== me && ownerLiveness(o) === "dead")
    await this.#ledger.forgetConsumers(gone.map((o) => o.ownerId))
  }

  /**
   * Processes the files a dead consumer claimed and did not commit, one at a time in their
   * original order, counting each attempt in the ledger before the file is read. A crash is
   * thus pinned on the one file in hand, never on its batch-mates: a file becomes poison only
   * after `maxAttempts` claims of which at least one had it alone, and is then sent to error/
   * unread. Commits here are process-crash durable only; one flush makes them all durable
   * before the first file moves, so the Maildir rule holds at one fsync for the whole lot.
   */
  async #retryAlone(items: Item[]): Promise<void> {
    if (items.length === 0) return
    const me = this.#owner.ownerId
    const poisonAt = Math.max(this.#maxAttempts, 2)
    for (const item of items) this.#inHand.add(item)
    countClaimed(this.summary, this.#log, items)
    // An attempt counts a death with the file in hand: judged or committed. Importing the
    // validator (tens of ms, more under load) and reading the file cannot be the file's fault,
    // so both come before the count; a kill during either costs the file nothing.
    await this.#decider.load()
    for (const item of items) {
      if (item.attempts >= poisonAt)
        item.outcome = this.#decider.reject(
          item,
          "poison",
          `crashed the consumer on each of ${item.attempts} attempts`,
          null,
        )
      else {
        const read = this.#decider.read(item)
        await this.#ledger.startAttempt(item, me)
        item.outcome = this.#decider.judge(item, read)
      }
      const outcome = item.outcome
      item.verdict = (
        await this.#ledger.lazily(() => this.#ledger.commit(me, [outcome], now(), this.#o.effect))
      )[0] as Verdict
      item.committed = true
      fault("after-commit")
    }
    await this.#ledger.flush(me, now())
    await this.#moveAll(items)
  }

  /** Says once per process and name that processing/ holds entries the inbox/ rules do not take. */
  #noteLeftInProcessing(names: readonly string[]): void {
    const fresh = names.filter((n) => !toldLeft.has(`${this.#q.processing}\0${n}`))
    if (fresh.length === 0) return
    for (const n of fresh) toldLeft.add(`${this.#q.processing}\0${n}`)
    this.#log.warn("left-in-processing", {
      count: names.length,
      file: fresh[0],
      problem:
        "processing/ holds entries with no claim whose names are not messages (hidden, not *.json, or not UTF-8); " +
        "left where they are, as in inbox/: move them out by hand",
    })
  }

  #isOwnerAlive(row: ClaimRow): boolean {
    if (row.owner === undefined) return false
    const liveness = ownerLiveness(row.owner)
    if (liveness !== "unknown") return liveness === "alive"
    return Date.now() - Date.parse(row.owner.heartbeatAt) < (this.#o.leaseMs ?? defaults.leaseMs)
  }
}

/**
 * A failure that ends the run, with how many of its files wait in processing/ for the next
 * start's recovery, and what that recovery will do with them.
 */
function withLeftovers(error: unknown, left: number, processing: string): unknown {
  if (left === 0 || !(error instanceof SpoolError)) return error
  return new SpoolError(
    error.code,
    `${error.message}\nnothing is lost: ${left} file${left === 1 ? "" : "s"} of this run wait in ${processing}/ with their claims; once the cause is fixed, the next consume on this root finishes them first (a consumer on another host once this one's lease has run out): a committed one is moved to the destination its commit recorded, never processed again, and the others are processed again`,
    { cause: error },
  )
}

/**
 * Where a committed file goes: error/ for a rejected file and for a verdict that refused it;
 * nowhere for a claim this consumer lost or a file that vanished (not its file to move).
 */
function destOf(o: Outcome, verdict: Verdict | undefined): "done" | "error" | undefined {
  if (verdict === "lost" || verdict === "vanished") return undefined
  return o.kind === "rejected" || verdict === "handler-rejected" || verdict === "beyond-horizon" ? "error" : "done"
}

function exists(path: string): boolean {
  try {
    return fs.lstatSync(path, { throwIfNoEntry: false }) !== undefined
  } catch {
    return false
  }
}

/**
 * Entries of processing/ already reported as left there, by directory and name: a watching
 * consumer recovers at every drain, and says so once, not every few seconds.
 */
const toldLeft = new Set<string>()

const now = (): string => new Date().toISOString()

/** Records where the I/O thread left each item (undefined status: unknown, so not in hand for sure). */
function markInProcessing(items: readonly Item[], status: Uint8Array | undefined): void {
  for (const [i, item] of items.entries()) {
    const st = status?.[i]
    item.inProcessing = st === undefined || st === InStatus.untried ? undefined : st === InStatus.moved
  }
}
