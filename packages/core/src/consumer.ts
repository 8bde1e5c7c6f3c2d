import fs from "node:fs"
import { join } from "node:path"
import { crashIfPoison, fault } from "./_fault.ts"
import { errnoOf, SpoolError } from "./errors.ts"
import { fsyncDir, type OpenDir, openDir, renameNoReplace, renameNoReplaceAt } from "./files.ts"
import type { Claim, ClaimRow, Effect, Outcome, Verdict } from "./ledger.ts"
import type { LedgerPort } from "./ledger-port.ts"
import type { PostgresEffect } from "./ledger-postgres.ts"
import { type Log, silentLog } from "./log.ts"
import {
  canonicalJson,
  decodeMessage,
  Message,
  type MessageType,
  type RejectReason,
  rawNumberField,
} from "./message.ts"
import { currentOwner, type Owner, ownerLiveness } from "./owner.ts"
import { alternateName, isMessageName, type Queue, scanDir } from "./queue.ts"

/** Settings of a consume run; every one has a default a demanding operator can live with. */
export interface ConsumeOptions<T extends Message = Message> {
  readonly queue: Queue
  readonly ledger: LedgerPort
  /** The message type; defaults to spool's Message. Must require at least Message's fields. */
  readonly type?: MessageType<T>
  /** A business effect committed in the same transaction as the processed row (for the ledger's backend). */
  readonly effect?: Effect | PostgresEffect
  /** Messages per ledger transaction. */
  readonly batchSize?: number
  /** Claims a file may take before it is declared poison (it crashed the consumer each time). */
  readonly maxAttempts?: number
  /** Files larger than this are sent to error/ as too-large without being read. */
  readonly maxBytes?: number
  /** Leave files younger than this (by mtime) for later: their producer may still be writing. */
  readonly minAgeMs?: number
  /** fsync directories after renames (the Maildir rule). Off only with --no-fsync. */
  readonly durable?: boolean
  /** How long another host's consumer may be silent before its claims count as abandoned. */
  readonly leaseMs?: number
  /** Stop claiming when aborted; the batch in hand is finished. */
  readonly signal?: AbortSignal
  readonly log?: Log
  /** Called after every committed batch, for progress displays. */
  readonly onBatch?: (summary: Readonly<ConsumeSummary>) => void
}

/** What a run did. */
export interface ConsumeSummary {
  claimed: number
  processed: number
  duplicates: number
  conflicts: number
  rejected: number
  rejectedBy: Partial<Record<RejectReason, number>>
  recovered: number
  batches: number
}

/** A summary of a run that did nothing yet (to add drains to, as watch mode does). */
export function emptySummary(): ConsumeSummary {
  return {
    claimed: 0,
    processed: 0,
    duplicates: 0,
    conflicts: 0,
    rejected: 0,
    rejectedBy: {},
    recovered: 0,
    batches: 0,
  }
}

export const defaults = {
  batchSize: 1000,
  maxAttempts: 3,
  maxBytes: 1024 * 1024,
  minAgeMs: 0,
  leaseMs: 120_000,
} as const

interface Item extends Claim {
  outcome?: Outcome
  committed?: boolean
  verdict?: Verdict
  /** readdir said it is a regular file; anything else is lstat-ed before it could be opened. */
  isRegular?: boolean
}

type QueueDirName = "inbox" | "processing" | "done" | "error"

const O_READ = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK

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
  readonly #type: MessageType<T>
  readonly #batchSize: number
  readonly #maxAttempts: number
  readonly #maxBytes: number
  readonly #minAgeMs: number
  readonly #durable: boolean
  readonly #buffer: Buffer
  /** Items this run has in processing/ and has not yet moved out. */
  #inHand: Item[] = []
  readonly #dirFds: { inbox: number; processing: number; done: number; error: number }
  readonly #openDirs: Record<QueueDirName, OpenDir>
  readonly summary: ConsumeSummary = emptySummary()

  constructor(o: ConsumeOptions<T>) {
    this.#o = o
    this.#q = o.queue
    this.#ledger = o.ledger
    this.#log = o.log ?? silentLog
    this.#type = o.type ?? (Message as unknown as MessageType<T>)
    this.#batchSize = Math.max(1, o.batchSize ?? defaults.batchSize)
    this.#maxAttempts = Math.max(1, o.maxAttempts ?? defaults.maxAttempts)
    this.#maxBytes = o.maxBytes ?? defaults.maxBytes
    this.#minAgeMs = o.minAgeMs ?? defaults.minAgeMs
    this.#durable = o.durable ?? true
    this.#buffer = Buffer.allocUnsafe(Math.min(this.#maxBytes, 64 * 1024 * 1024) + 1)
    this.#dirFds = {
      inbox: openDir(this.#q.inbox),
      processing: openDir(this.#q.processing),
      done: openDir(this.#q.done),
      error: openDir(this.#q.error),
    }
    const at = (d: QueueDirName): OpenDir => ({ path: this.#q[d], fd: this.#dirFds[d] })
    this.#openDirs = { inbox: at("inbox"), processing: at("processing"), done: at("done"), error: at("error") }
  }

  get #isStopping(): boolean {
    return this.#o.signal?.aborted === true
  }

  async run(): Promise<ConsumeSummary> {
    await this.#ledger.registerConsumer(this.#owner, now())
    try {
      await this.#recover()
      while (!this.#isStopping) {
        const claimedAny = await this.#pass()
        if (!claimedAny) break
      }
      await this.#ledger.unregisterConsumer(this.#owner.ownerId)
    } catch (error) {
      await this.#handBack()
      throw error
    } finally {
      for (const fd of Object.values(this.#dirFds)) fs.closeSync(fd)
    }
    return this.summary
  }

  /**
   * After a fatal error (disk full, ledger gone read-only) leave nothing in processing/:
   * committed files go on to done/ or error/, the rest back to inbox/. Best effort: what
   * cannot be done here, recovery does on the next start.
   */
  async #handBack(): Promise<void> {
    let isFlushed = false
    try {
      // #retryAlone's commits are not yet durable: no committed file moves before they are.
      await this.#ledger.flush(this.#owner.ownerId, now())
      isFlushed = true
    } catch {}
    for (const item of this.#inHand) {
      try {
        const o = item.committed ? item.outcome : undefined
        if (o !== undefined) {
          if (isFlushed)
            await this.#moveOut(o.name, destOf(o, item.verdict), o.kind === "rejected" ? o.destName : o.name, o.claimId)
        } else if (this.#ledger.backend === "postgres") {
          // A commit that failed over the network may still have committed: only recovery,
          // which reads the claim's state, can tell. The file waits in processing/ for it.
        } else if (renameNoReplace(join(this.#q.processing, item.name), join(this.#q.inbox, item.name)) === "moved")
          await this.#ledger.release(this.#owner.ownerId, [item])
      } catch {}
    }
    this.#inHand = []
    try {
      this.#sync("inbox", "processing", "done", "error")
    } catch {}
  }

  /** One pass over inbox/: claims and finishes batches; true if it claimed anything. */
  async #pass(): Promise<boolean> {
    let claimedAny = false
    const names: string[] = []
    const regular = new Set<string>()
    const cutoff = Date.now() - this.#minAgeMs
    let hasUndecodable = false
    for (const e of scanDir(this.#q.inbox, 1024)) {
      if (!isMessageName(e.name)) continue
      // A name that is not valid UTF-8 arrives with U+FFFD in place of its bad bytes, a name
      // that opens nothing: it is renamed below, and taken in the next pass.
      if (e.name.includes("\uFFFD") && !exists(join(this.#q.inbox, e.name))) {
        hasUndecodable = true
        continue
      }
      if (this.#minAgeMs > 0 && !this.#isOldEnough(e.name, cutoff)) continue
      names.push(e.name)
      if (e.isFile()) regular.add(e.name)
      if (names.length < this.#batchSize) continue
      claimedAny = (await this.#claimAndProcess(names, regular)) || claimedAny
      names.length = 0
      regular.clear()
      if (this.#isStopping) return claimedAny
    }
    if (names.length > 0) claimedAny = (await this.#claimAndProcess(names, regular)) || claimedAny
    if (hasUndecodable && this.#renameUndecodable() > 0) claimedAny = true
    return claimedAny
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
      for (let k = 0; ; k++) {
        const to = k === 0 ? name : alternateName(name, k)
        if (Buffer.byteLength(to) > 255) continue
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

  #isOldEnough(name: string, cutoff: number): boolean {
    try {
      return fs.lstatSync(join(this.#q.inbox, name)).mtimeMs <= cutoff
    } catch {
      return false
    }
  }

  async #claimAndProcess(names: readonly string[], regular: ReadonlySet<string>): Promise<boolean> {
    const claims = await this.#ledger.claim(this.#owner.ownerId, names, now())
    if (claims.length === 0) return false
    const held: Item[] = []
    const gone: Claim[] = []
    for (const c of claims) {
      const moved = this.#renameAt("inbox", c.name, "processing", c.name)
      if (moved === "moved") held.push({ ...c, isRegular: regular.has(c.name) })
      else {
        if (moved === "exists")
          this.#log.warn("stray-file", {
            file: c.name,
            problem:
              "processing/ already holds a file of this name with no claim; it is left in inbox/ until recovery takes the other one",
          })
        gone.push(c)
      }
    }
    this.#inHand = held
    await this.#ledger.release(this.#owner.ownerId, gone)
    if (held.length === 0) return gone.length < claims.length
    this.#sync("inbox", "processing")
    fault("after-claim")
    this.summary.claimed += held.length
    for (const item of held) this.#log.debug("claimed", { file: item.name, claim_id: item.claimId })
    await this.#finish(held)
    // Let signal handlers run between batches: SIGTERM is honoured at a batch boundary.
    await new Promise((r) => setImmediate(r))
    return true
  }

  /** Decides, commits and moves a batch of items that are in processing/. */
  async #finish(items: Item[]): Promise<void> {
    for (const item of items) item.outcome = this.#decide(item)
    const outcomes = items.map((i) => i.outcome as Outcome)
    const verdicts = await this.#ledger.commit(outcomes, now(), this.#o.effect)
    for (const [i, item] of items.entries()) {
      item.committed = true
      item.verdict = verdicts[i] as Verdict
    }
    fault("after-commit")
    await this.#moveAll(items)
  }

  /** Moves committed items out of processing/ (the acknowledgement) and makes the moves durable. */
  async #moveAll(items: readonly Item[]): Promise<void> {
    let toDone = false
    let toError = false
    for (const item of items) {
      const o = item.outcome as Outcome
      const verdict = item.verdict as Verdict
      this.#count(o, verdict)
      const dest = destOf(o, verdict)
      if (dest === "done") toDone = true
      else toError = true
      await this.#moveOut(o.name, dest, o.kind === "rejected" ? o.destName : o.name, o.claimId)
    }
    this.#inHand = []
    // A directory no file entered has nothing to make durable: its fsync would be a no-op.
    if (toDone && toError) this.#sync("processing", "done", "error")
    else this.#sync("processing", toError ? "error" : "done")
    fault("after-move")
    this.summary.batches++
    this.#o.onBatch?.(this.summary)
  }

  #count(o: Outcome, v: Verdict): void {
    switch (v) {
      case "processed":
        this.summary.processed++
        return
      case "conflict":
        this.summary.conflicts++
        this.summary.duplicates++
        this.#log.warn("conflict", { file: o.name, msg_id: o.kind === "accepted" ? o.msgId : undefined })
        return
      case "duplicate":
        this.summary.duplicates++
        this.#log.info("duplicate", { file: o.name, msg_id: o.kind === "accepted" ? o.msgId : undefined })
        return
      case "rejected":
      case "handler-rejected":
      case "beyond-horizon": {
        const reason: RejectReason =
          o.kind === "rejected" ? (o.reason as RejectReason) : v === "beyond-horizon" ? v : "handler"
        this.summary.rejected++
        this.summary.rejectedBy[reason] = (this.summary.rejectedBy[reason] ?? 0) + 1
        if (o.kind === "rejected") this.#log.info("rejected", { file: o.name, reason, detail: o.detail })
        else this.#log.warn("rejected", { file: o.name, reason, msg_id: o.msgId })
      }
    }
  }

  /** Reads and judges one claimed file. Never opens anything that is not a regular file. */
  #decide(item: Item): Outcome {
    const path = join(this.#q.processing, item.name)
    if (!item.isRegular) {
      // Never open what might be a FIFO (blocks), a device (side effects) or a link.
      let st: fs.Stats
      try {
        st = fs.lstatSync(path)
      } catch (error) {
        throw new SpoolError("io", `cannot stat ${path}: ${String(error)}`, { cause: error })
      }
      if (st.isSymbolicLink()) return this.#reject(item, "symlink", "a symbolic link; its target was not touched", null)
      if (!st.isFile()) return this.#reject(item, "not-regular", kindOf(st), null)
    }
    let fd: number
    try {
      fd = fs.openSync(path, O_READ)
    } catch (error) {
      const code = errnoOf(error)
      if (code === "ELOOP") return this.#reject(item, "symlink", "a symbolic link; its target was not touched", null)
      if (code === "ENXIO") return this.#reject(item, "not-regular", "a socket", null)
      throw new SpoolError("io", `cannot open ${path}: ${String(error)}`, { cause: error })
    }
    let bytes: Buffer
    try {
      const st = fs.fstatSync(fd)
      if (!st.isFile()) return this.#reject(item, "not-regular", kindOf(st), null)
      if (st.size > this.#maxBytes)
        return this.#reject(item, "too-large", `${st.size} bytes, over the ${this.#maxBytes}-byte limit`, null)
      // The run's buffer holds at most 64 MiB; a larger --max-bytes gets a buffer per file.
      // read(2) may return less than asked (NFS, FUSE), and the file may still be growing: read
      // to end of file or to one byte past the limit, whichever comes first.
      let buffer = st.size < this.#buffer.length ? this.#buffer : Buffer.allocUnsafe(this.#maxBytes + 1)
      let n = 0
      for (;;) {
        const wanted = buffer.length - n
        const r = fs.readSync(fd, buffer, n, wanted, n)
        n += r
        // A short read that reached the size fstat gave is end of file: skip the read that
        // would only return 0 (one syscall per message saved).
        if (r === 0 || n > this.#maxBytes || (r < wanted && n >= st.size)) break
        if (n === buffer.length) {
          const bigger = Buffer.allocUnsafe(this.#maxBytes + 1)
          buffer.copy(bigger)
          buffer = bigger
        }
      }
      if (n > this.#maxBytes) return this.#reject(item, "too-large", `grew past the ${this.#maxBytes}-byte limit`, null)
      bytes = buffer.subarray(0, n)
    } finally {
      fs.closeSync(fd)
    }
    crashIfPoison(item.name)
    const hash = Bun.CryptoHasher.hash("sha256", bytes, "hex")
    const decoded = decodeMessage(bytes, this.#type)
    if (!decoded.ok) return this.#reject(item, decoded.reason, decoded.detail, hash)
    const m = decoded.message
    return {
      kind: "accepted",
      name: item.name,
      claimId: item.claimId,
      msgId: m.msg_id,
      orderNo: m.order_no,
      seq: m.seq,
      amount: rawNumberField(decoded.text, "amount") ?? String(m.amount),
      hash,
      contentHash: Bun.CryptoHasher.hash("sha256", canonicalJson(decoded.value), "hex"),
      message: m,
    }
  }

  #reject(item: Item, reason: RejectReason, detail: string, hash: string | null): Outcome {
    return {
      kind: "rejected",
      name: item.name,
      claimId: item.claimId,
      destName: this.#freeName(this.#q.error, item.name),
      reason,
      detail,
      hash,
    }
  }

  /** The first of name, name~1, name~2, ... that does not exist in dir. */
  #freeName(dir: string, name: string): string {
    for (let k = 0; ; k++) {
      const candidate = k === 0 ? name : alternateName(name, k)
      try {
        fs.lstatSync(join(dir, candidate))
      } catch (error) {
        if (errnoOf(error) === "ENOENT") return candidate
        throw error
      }
    }
  }

  /** Moves a committed file out of processing/, never replacing anything. */
  async #moveOut(name: string, dest: "done" | "error", preferred: string, claimId: string): Promise<void> {
    for (let k = 0; ; k++) {
      const to = k === 0 ? preferred : alternateName(name, k)
      const r = this.#renameAt("processing", name, dest, to)
      if (r === "exists") continue
      if (r === "missing")
        throw new SpoolError(
          "io",
          `${join(this.#q.processing, name)} vanished before it could be moved to ${this.#q[dest]}/`,
        )
      if (dest === "error" && to !== preferred) await this.#ledger.renameFailure(claimId, to)
      return
    }
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
   * e.g. after a ledger restore) are claimed afresh and processed as a batch.
   */
  async #recover(): Promise<void> {
    const me = this.#owner.ownerId
    const dead = (await this.#ledger.listClaims()).filter((r) => r.ownerId !== me && !this.#isOwnerAlive(r))
    const finished: ClaimRow[] = []
    const retry: Item[] = []
    for (const row of await this.#ledger.adoptClaims(dead, me)) {
      const inProcessing = exists(join(this.#q.processing, row.name))
      if (row.state === "claimed" && inProcessing) {
        retry.push({ name: row.name, claimId: row.claimId, attempts: row.attempts })
        continue
      }
      if (row.state === "committed" && inProcessing) {
        await this.#moveOut(row.name, row.dest ?? "done", row.destName ?? row.name, row.claimId)
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
    for (const e of scanDir(this.#q.processing)) {
      if (claimed.has(e.name)) continue
      const c = await this.#ledger.claimOrphan(e.name, me, now())
      if (!c) continue
      if (!exists(join(this.#q.processing, e.name))) {
        // Finished by its owner between our listing and our claim.
        await this.#ledger.dropClaims([c])
        continue
      }
      this.#log.warn("recovered", { file: e.name, step: "orphan in processing/ with no claim" })
      this.summary.recovered++
      orphans.push({ ...c })
    }
    for (let i = 0; i < orphans.length; i += this.#batchSize) {
      this.#inHand = orphans.slice(i, i + this.#batchSize)
      this.summary.claimed += this.#inHand.length
      await this.#finish(this.#inHand)
    }
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
    this.#inHand = items
    this.summary.claimed += items.length
    for (const item of items) {
      if (item.attempts >= poisonAt)
        item.outcome = this.#reject(item, "poison", `crashed the consumer on each of ${item.attempts} attempts`, null)
      else {
        await this.#ledger.startAttempt(item, me)
        item.outcome = this.#decide(item)
      }
      const outcome = item.outcome
      item.verdict = (
        await this.#ledger.lazily(() => this.#ledger.commit([outcome], now(), this.#o.effect))
      )[0] as Verdict
      item.committed = true
      fault("after-commit")
    }
    await this.#ledger.flush(me, now())
    await this.#moveAll(items)
  }

  #isOwnerAlive(row: ClaimRow): boolean {
    if (row.owner === undefined) return false
    const liveness = ownerLiveness(row.owner)
    if (liveness !== "unknown") return liveness === "alive"
    return Date.now() - Date.parse(row.owner.heartbeatAt) < (this.#o.leaseMs ?? defaults.leaseMs)
  }
}

/** Where a committed file goes: error/ for a rejected file and for a verdict that refused it. */
function destOf(o: Outcome, verdict: Verdict | undefined): "done" | "error" {
  return o.kind === "rejected" || verdict === "handler-rejected" || verdict === "beyond-horizon" ? "error" : "done"
}

function exists(path: string): boolean {
  try {
    fs.lstatSync(path)
    return true
  } catch {
    return false
  }
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** The name with each byte that is not part of valid UTF-8 written as %XX; undefined if all valid. */
function escapeUndecodable(raw: Uint8Array): string | undefined {
  try {
    strictUtf8.decode(raw)
    return undefined
  } catch {}
  let out = ""
  for (let i = 0; i < raw.length; ) {
    let decoded: string | undefined
    let n = 1
    for (; n <= 4 && i + n <= raw.length; n++) {
      try {
        decoded = strictUtf8.decode(raw.subarray(i, i + n))
        break
      } catch {}
    }
    if (decoded === undefined) {
      out += `%${(raw[i] as number).toString(16).toUpperCase().padStart(2, "0")}`
      n = 1
    } else out += decoded
    i += n
  }
  return out
}

function kindOf(st: fs.Stats): string {
  if (st.isDirectory()) return "a directory"
  if (st.isFIFO()) return "a FIFO (named pipe)"
  if (st.isSocket()) return "a socket"
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device"
  return "not a regular file"
}

const now = (): string => new Date().toISOString()
