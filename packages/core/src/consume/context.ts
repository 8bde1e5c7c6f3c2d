import fs from "node:fs"
import { wallClock } from "../clock.ts"
import type { Claim, Outcome, Verdict } from "../ledger/model.ts"
import type { AnyEffect, LedgerPort } from "../ledger/port.ts"
import { type Log, silentLog } from "../log.ts"
import { type FileRead, fsyncDir, type OpenDir, openDir } from "../queue/files.ts"
import { currentOwner, type Owner } from "../queue/owner.ts"
import type { Queue } from "../queue/root.ts"
import { type DeferPolicy, deferPolicyOf } from "../transient.ts"
import { Decider } from "./decide.ts"
import { type ConsumeOptions, defaults, maxMessageBytes } from "./options.ts"
import { type ConsumeSummary, emptySummary } from "./summary.ts"

/** A claimed file on its way through the protocol. */
export interface Item extends Claim {
  outcome?: Outcome
  committed?: boolean
  /** When its commit returned (clockNow): past the move guard after it, its claim may have been taken over. */
  committedAt?: number
  verdict?: Verdict
  /** readdir said it is a regular file; anything else is lstat-ed before it could be opened. */
  isRegular?: boolean
  /** true once the file is known to be in processing/; false when it is known not to be. */
  inProcessing?: boolean | undefined
  /** The file as the I/O thread read it, if it did, and the sha256 of its bytes. */
  read?: FileRead | undefined
  hash?: string | undefined
  /** The name its deferrals row gave it in deferred/, once its commit deferred it. */
  deferredAs?: string
  /** Retried alone, its attempt counted by this run and not yet committed. */
  isAttempted?: boolean
}

type QueueDirName = "inbox" | "processing" | "done" | "error" | "deferred"

/**
 * What the steps of one consume run share: its settings, the queue directories held open, the
 * files in hand and the summary. The steps are functions of it; only the engine creates one.
 */
export class Context {
  readonly options: ConsumeOptions
  readonly queue: Queue
  readonly ledger: LedgerPort<AnyEffect>
  readonly log: Log
  readonly owner: Owner = currentOwner()
  readonly batchSize: number
  /**
   * The attempts at which a claimed message is poison (`maxAttempts`, at least 2): only a claim
   * that had it alone can reach it, so its batch-mates never pay for its crash.
   */
  readonly poisonAt: number
  readonly maxBytes: number
  readonly minAgeMs: number
  readonly durable: boolean
  readonly defer: DeferPolicy
  /**
   * How long after its commit a batch may still be moved without asking the ledger whether
   * its claims are still this consumer's: a quarter lease, the heartbeat's period. Only a
   * consumer silent for a whole lease can lose its claims.
   */
  readonly moveGuardMs: number
  readonly dirs: Readonly<Record<QueueDirName, OpenDir>>
  readonly decider: Decider
  /** Items this run has claimed and not yet moved out of processing/. */
  readonly inHand = new Set<Item>()
  /** Committed claims whose files have durably left processing/: forgotten at the next claim. */
  readonly moved: Claim[] = []
  readonly summary: ConsumeSummary = emptySummary()
  /** Whether the current pass has claimed anything. */
  passClaimed = false
  /** Orphans recovery left in processing/ for being younger than minAgeMs; they count as deferred. */
  youngOrphans = 0

  constructor(o: ConsumeOptions) {
    this.options = o
    this.queue = o.queue
    this.ledger = o.ledger
    this.log = o.log ?? silentLog
    this.batchSize = Math.max(1, o.batchSize ?? defaults.batchSize)
    this.poisonAt = Math.max(2, o.maxAttempts ?? defaults.maxAttempts)
    this.maxBytes = Math.min(o.maxBytes ?? defaults.maxBytes, maxMessageBytes)
    this.minAgeMs = o.minAgeMs ?? defaults.minAgeMs
    this.durable = o.durable ?? true
    this.defer = deferPolicyOf(o.defer, "consume")
    this.moveGuardMs = (o.leaseMs ?? defaults.leaseMs) / 4
    const at = (d: QueueDirName): OpenDir => ({ path: this.queue[d], fd: openDir(this.queue[d]) })
    this.dirs = {
      inbox: at("inbox"),
      processing: at("processing"),
      done: at("done"),
      error: at("error"),
      deferred: at("deferred"),
    }
    this.decider = new Decider(o.type, this.dirs.processing, this.queue.error, this.maxBytes)
  }

  get isStopping(): boolean {
    return this.options.signal?.aborted === true
  }

  sync(...dirs: QueueDirName[]): void {
    if (!this.durable) return
    for (const d of dirs) fsyncDir(this.dirs[d].fd)
  }

  close(): void {
    for (const d of Object.values(this.dirs)) fs.closeSync(d.fd)
  }
}

export const now = (): string => new Date(wallClock()).toISOString()
