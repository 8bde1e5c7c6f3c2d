// What a typed consumer does around the engine: one drain (or watch) with its settings and its
// source, the results told to `onOutcome`, and a close that waits for the drains in flight.
import { consume } from "./consume/engine.ts"
import type { ConsumeSummary } from "./consume/summary.ts"
import { SpoolError } from "./errors.ts"
import type { AcceptedOutcome, Outcome, Verdict } from "./ledger/model.ts"
import type { AnyEffect, LedgerPort } from "./ledger/port.ts"
import { parseResult, resultText } from "./ledger/verdicts.ts"
import { type Log, silentLog } from "./log.ts"
import type { LibraryLog } from "./logger.ts"
import type { Message, MessageType } from "./message/validate.ts"
import type { Queue } from "./queue/root.ts"
import { writeReports } from "./report/reports.ts"
import { openSource } from "./source/open.ts"
import type { SourcePort } from "./source/port.ts"
import { type DeferPolicy, TransientError } from "./transient.ts"
import { watch } from "./watch.ts"

/** What became of one message of a batch once its batch committed, as `onOutcome` is told. */
export interface HandledOutcome {
  readonly file: string
  readonly msgId: string
  /** `processed`, `duplicate`, `conflict`, `handler-rejected`, `beyond-horizon`, `deferred`, `expired`, or `lost` (taken over). */
  readonly verdict: Verdict
  /**
   * The result stored with the msg_id's processed row: the one the handler just returned
   * (`processed`), or the first processing's (`duplicate`, `conflict`); undefined for none.
   */
  readonly result: unknown
  /**
   * What the handler threw, with its message and stack: for `handler-rejected`, and for
   * `deferred` and `expired` (its TransientError). Undefined when the handler returned.
   */
  readonly error?: Error
}

/** The consume settings a typed consumer passes on to each drain. */
export interface DrainSettings<T extends Message> {
  readonly type?: MessageType<T>
  readonly batchSize?: number
  readonly maxAttempts?: number
  readonly maxBytes?: number
  readonly minAgeMs?: number
  readonly durable?: boolean
  readonly defer?: Partial<DeferPolicy>
  readonly idleWaitMs?: number
  readonly rescanMs?: number
  readonly batchWindowMs?: number
  readonly log?: Log
  readonly onOutcome?: (outcome: HandledOutcome) => void | PromiseLike<void>
}

/**
 * The results handlers returned in the commit in flight, by claim, and the outcomes told to
 * `onOutcome` once it committed: a redelivery's result is read back from the ledger.
 */
export class Results {
  readonly #ledger: LedgerPort<never>
  readonly #onOutcome: DrainSettings<Message>["onOutcome"]
  readonly #returned = new Map<string, unknown>()
  readonly #errors = new Map<string, Error>()
  readonly #log: LibraryLog | undefined

  constructor(ledger: LedgerPort<never>, onOutcome: DrainSettings<Message>["onOutcome"], log?: LibraryLog) {
    this.#ledger = ledger
    this.#onOutcome = onOutcome
    this.#log = log
  }

  /** Keeps what a handler returned for its outcome, and returns it for the ledger to store. */
  keep(o: AcceptedOutcome, result: unknown): unknown {
    if (this.#onOutcome !== undefined) this.#returned.set(o.claimId, result)
    return result
  }

  /**
   * Runs a synchronous handler, keeping what it throws for its outcome (and throwing it on). A
   * result the ledger cannot store, or a promise, fails it here, so that its outcome says why.
   */
  attempt<R>(o: AcceptedOutcome, handle: () => R): R {
    this.#forget(o)
    try {
      const result = handle()
      // A promise is refused below; what it rejects with later must not crash the process.
      if (typeof (result as PromiseLike<unknown> | undefined)?.then === "function")
        Promise.resolve(result).catch(() => {})
      resultText(result, true)
      return result
    } catch (error) {
      throw this.#thrown(o, error)
    }
  }

  /** Runs an asynchronous handler, keeping what it throws or rejects with for its outcome. */
  async attemptAsync<R>(o: AcceptedOutcome, handle: () => R | PromiseLike<R>): Promise<R> {
    this.#forget(o)
    try {
      const result = await handle()
      resultText(result)
      return result
    } catch (error) {
      throw this.#thrown(o, error)
    }
  }

  /**
   * Forgets what an earlier attempt under this claim left: a batch whose commit failed is tried
   * again by recovery under the same claim, and its outcome must not carry the failed one's error.
   */
  #forget(o: { readonly claimId: string }): void {
    this.#returned.delete(o.claimId)
    this.#errors.delete(o.claimId)
  }

  #thrown(o: AcceptedOutcome, error: unknown): unknown {
    const err = error instanceof Error ? error : new Error(String(error), { cause: error })
    if (this.#onOutcome !== undefined) this.#errors.set(o.claimId, err)
    // A TransientError is a deferral, which the engine logs; anything else is the handler's bug or
    // a permanent refusal, said with its stack (pino's err serializer prints it).
    if (!(error instanceof TransientError)) this.#log?.error("handler-failed", { file: o.name, msg_id: o.msgId, err })
    return error
  }

  /** The engine's onCommit: each accepted outcome's verdict and stored result, to onOutcome. */
  readonly committed = async (outcomes: readonly Outcome[], verdicts: readonly Verdict[]): Promise<void> => {
    const onOutcome = this.#onOutcome
    if (onOutcome === undefined) return
    try {
      for (const [i, o] of outcomes.entries()) {
        if (o.kind !== "accepted") continue
        // Each message is told on its own: one that onOutcome fails on does not keep it from the rest.
        try {
          const verdict = verdicts[i] as Verdict
          const result =
            verdict === "processed"
              ? parseResult(resultText(this.#returned.get(o.claimId)))
              : verdict === "duplicate" || verdict === "conflict"
                ? await this.#ledger.resultOf(o.msgId)
                : undefined
          const error =
            this.#errors.get(o.claimId) ?? (verdict === "handler-rejected" ? await this.#refusal(o) : undefined)
          await onOutcome({ file: o.name, msgId: o.msgId, verdict, result, ...(error && { error }) })
        } catch (error) {
          this.#log?.warn("on-outcome-failed", { file: o.name, msg_id: o.msgId, error: describe(error) })
        }
      }
    } finally {
      for (const o of outcomes) this.#forget(o)
    }
  }

  /**
   * Why the ledger refused an effect the handler returned from (on PostgreSQL, a statement that
   * failed inside it and was caught leaves the transaction aborted): its failure's detail.
   */
  async #refusal(o: AcceptedOutcome): Promise<Error> {
    const history = await this.#ledger.history({ payloadHashes: [o.hash] })
    const detail = history.failures.find((f) => f.claimId === o.claimId)?.detail
    return new Error(detail ?? "the ledger refused the handler's effect")
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/**
 * A consumer's source: one it was given (the caller's to close), or one it opens from a URL at
 * its first drain and closes with the consumer.
 */
export class ConsumerSource {
  readonly #given: SourcePort | undefined
  readonly #url: string | undefined
  readonly #log: Log | undefined
  readonly #root: string
  #opened: Promise<SourcePort> | undefined

  constructor(source: string | SourcePort | undefined, log: Log | undefined, root: string) {
    if (typeof source === "string") this.#url = source
    else this.#given = source
    this.#log = log
    this.#root = root
  }

  get isSet(): boolean {
    return this.#given !== undefined || this.#url !== undefined
  }

  /**
   * The source, opened on first use; undefined for a consumer of inbox/. `signal` ends the wait
   * for a broker out of reach (the open then rejects, and the next call opens anew).
   */
  async port(signal?: AbortSignal): Promise<SourcePort | undefined> {
    if (this.#given !== undefined) return this.#given
    if (this.#url === undefined) return undefined
    this.#opened ??= openSource(this.#url, {
      root: this.#root,
      ...(this.#log === undefined ? {} : { log: this.#log }),
      ...(signal === undefined ? {} : { signal }),
    })
    try {
      return await this.#opened
    } catch (error) {
      // An unreachable broker is tried again by the next drain, not remembered as a failure.
      this.#opened = undefined
      throw error
    }
  }

  /** Closes the source this consumer opened (its acks flushed); a source it was given is left open. */
  async close(): Promise<void> {
    const opened = this.#opened
    this.#opened = undefined
    if (opened !== undefined) await (await opened.catch(() => undefined))?.close()
  }
}

/** How long a watch of inbox/ waits between drains without an event, and after one (as `consume --watch`'s defaults). */
const watchDefaults = { rescanMs: 5000, batchWindowMs: 0 }

/**
 * One drain: the engine with the consumer's settings, then the reports. With a source, it
 * receives until the source has had nothing for `idleWaitMs`, or, `untilStopped`, until `signal`.
 * Without one, `untilStopped` watches inbox/ until `signal`, as `consume --watch` does.
 */
export async function drainOnce<T extends Message, E extends AnyEffect>(
  queue: Queue,
  ledger: LedgerPort<E>,
  config: DrainSettings<T>,
  effect: E | undefined,
  results: Results,
  run: { readonly signal?: AbortSignal; readonly source?: SourcePort; readonly untilStopped?: boolean },
): Promise<ConsumeSummary> {
  const settings = {
    ...(config.type && { type: config.type }),
    ...(effect && { effect }),
    ...(config.idleWaitMs !== undefined && { idleWaitMs: config.idleWaitMs }),
    ...(config.batchSize !== undefined && { batchSize: config.batchSize }),
    ...(config.maxAttempts !== undefined && { maxAttempts: config.maxAttempts }),
    ...(config.maxBytes !== undefined && { maxBytes: config.maxBytes }),
    ...(config.minAgeMs !== undefined && { minAgeMs: config.minAgeMs }),
    ...(config.durable !== undefined && { durable: config.durable }),
    ...(config.defer && { defer: config.defer }),
    ...(config.onOutcome && { onCommit: results.committed }),
  }
  if (run.untilStopped && run.source === undefined && run.signal !== undefined)
    // watch() rewrites the reports itself: after a drain that changed something, and before it returns.
    return watch<E, T>({
      queue,
      ledger,
      ...settings,
      log: config.log ?? silentLog,
      signal: run.signal,
      rescanMs: config.rescanMs ?? watchDefaults.rescanMs,
      batchWindowMs: config.batchWindowMs ?? watchDefaults.batchWindowMs,
    })
  const summary = await consume<T, E>({
    queue,
    ledger,
    ...settings,
    ...(run.signal && { signal: run.signal }),
    ...(run.source && { source: run.source, untilStopped: run.untilStopped === true }),
    ...(config.log && { log: config.log }),
  })
  await writeReports(queue, ledger)
  return summary
}

/** A close asked for, and the promise close() returns. */
interface Closing {
  readonly close: () => void | Promise<void>
  readonly done: PromiseWithResolvers<void>
}

/** A consumer's drains in flight: closing waits for them rather than closing the ledger under one. */
export class Drains {
  readonly #inFlight = new Set<Promise<unknown>>()
  #closing: Closing | undefined
  readonly #stop = new AbortController()

  /** Aborted by close(): a watch in flight ends as its own signal would end it, then the close runs. */
  get stopping(): AbortSignal {
    return this.#stop.signal
  }

  get isDraining(): boolean {
    return this.#inFlight.size > 0
  }

  /** Runs `drain`, unless the consumer is closed or closing. */
  start<R>(drain: () => Promise<R>): Promise<R> {
    if (this.#closing !== undefined)
      return Promise.reject(
        new SpoolError("usage", "this consumer is closed; create a new one to drain the queue again"),
      )
    const running = drain()
    this.#inFlight.add(running)
    // A close asked for meanwhile is done by the last drain to end, before its caller resumes.
    return running.finally(() => {
      this.#inFlight.delete(running)
      if (this.#inFlight.size === 0 && this.#closing !== undefined) return this.#closeNow(this.#closing)
    })
  }

  /** Refuses new drains and runs `close`: at once when no drain is in flight, else after the last one. */
  close(close: () => void | Promise<void>): Promise<void> {
    if (this.#closing === undefined) {
      this.#closing = { close, done: Promise.withResolvers<void>() }
      this.#stop.abort("close")
      if (this.#inFlight.size === 0) void this.#closeNow(this.#closing)
    }
    return this.#closing.done.promise
  }

  /** Runs the close; the promise returned settles with it but never rejects (its error is close()'s). */
  #closeNow(c: Closing): Promise<void> {
    let closed: Promise<void>
    try {
      closed = Promise.resolve(c.close())
    } catch (error) {
      closed = Promise.reject(error)
    }
    c.done.resolve(closed)
    return closed.then(
      () => {},
      () => {},
    )
  }
}
