import type { Database } from "bun:sqlite"
import Big from "big.js"
import type { SQL } from "bun"
import { consume } from "./consume/engine.ts"
import type { ConsumeSummary } from "./consume/summary.ts"
import { SpoolError } from "./errors.ts"
import { bindingFile, readBinding } from "./ledger/binding.ts"
import type { AcceptedOutcome, Outcome, Verdict } from "./ledger/model.ts"
import { openPostgresLedger, openSqliteLedger, resolveLedgerUrl } from "./ledger/open.ts"
import type { AnyEffect, LedgerPort } from "./ledger/port.ts"
import { type PostgresEffect, type PostgresLedger, redact } from "./ledger/postgres/ledger.ts"
import type { Effect, SqliteLedger } from "./ledger/sqlite/ledger.ts"
import { parseResult, resultText } from "./ledger/verdicts.ts"
import type { Log } from "./log.ts"
import type { Message, MessageType } from "./message/validate.ts"
import { openQueue, type Queue, resolveRoot } from "./queue/root.ts"
import { writeReports } from "./report/reports.ts"
import type { DeferPolicy } from "./transient.ts"

/**
 * A message as a handler sees it: its `amount` is the exact decimal the file wrote (a big.js
 * `Big`: `12345678901234567.89` stays that, where a double would say `12345678901234568`); every
 * other field as your type validated it.
 */
export type Exact<T extends Message> = Omit<T, "amount"> & { readonly amount: Big }

/**
 * An amount in minor units (cents for a scale of 2), exactly, as a bigint. An amount with more
 * decimals than `scale` is refused (RangeError), never rounded: `minorUnits(new Big("1.005"))`
 * throws, `minorUnits(new Big("12345678901234567.89"))` is `1234567890123456789n`.
 */
export function minorUnits(amount: Big, scale = 2): bigint {
  const scaled = amount.times(new Big(10).pow(scale))
  if (!scaled.eq(scaled.round(0, Big.roundDown)))
    throw new RangeError(`${amount.toFixed()} has more than ${scale} decimal places`)
  return BigInt(scaled.toFixed(0))
}

/** What a handler may return to have it stored with the processed row: JSON, or nothing. */
export type Json = string | number | boolean | null | readonly Json[] | { readonly [key: string]: Json | undefined }

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
}

/** Which delivery a handler is applying. */
export interface Delivery {
  readonly file: string
  readonly msgId: string
  /** sha256 of the file's bytes. */
  readonly payloadHash: string
}

/** What a typed consumer is told on either ledger: the queue, the message type and consume's settings. */
export interface ConsumerOptions<T extends Message> {
  /** Queue root; default `$SPOOL_ROOT`, else the root the working directory is in, else `./spool`. */
  readonly root?: string
  /**
   * Your message type: an arktype type that includes spool's required fields, typically
   * `Message.and({ ... })`. Files it rejects go to error/ as missing-field or invalid-field.
   */
  readonly type?: MessageType<T>
  readonly batchSize?: number
  readonly maxAttempts?: number
  readonly maxBytes?: number
  readonly minAgeMs?: number
  readonly durable?: boolean
  /**
   * How long a lock wait on the ledger may last (ms, default 10 s), as consume's `--busy-timeout`:
   * SQLite's busy timeout; on PostgreSQL the lock_timeout of the consumer's sessions, which the
   * handler's statements run in too. Past it a drain fails (a SpoolError, code `ledger`) and
   * hands its files back.
   */
  readonly busyTimeoutMs?: number
  /**
   * When a message whose handler threw a TransientError is tried again: the first delay, the
   * cap and the maximum age (in ms), each defaulting to `defaultDeferPolicy`'s (5 min, 1 h, 5 days).
   */
  readonly defer?: Partial<DeferPolicy>
  readonly log?: Log
  /**
   * Called once per message that passed validation, after its batch committed and before its
   * file moves: a redelivery gets the first processing's stored result here. Informational:
   * the commit is durable whatever it does, and an error it throws is logged as a warning.
   */
  readonly onOutcome?: (outcome: HandledOutcome) => void | PromiseLike<void>
}

/** How to build a consumer on the SQLite ledger in the root, for your own message type and business effect. */
export interface ConsumerConfig<T extends Message> extends ConsumerOptions<T> {
  /** Creates or upgrades your tables in the ledger database; runs in one transaction at open. */
  readonly setup?: (db: Database) => void
  /**
   * Applies a message the first time its msg_id is seen, inside the ledger transaction: your
   * writes on `db` commit together with the processed row, or not at all. Never called for a
   * duplicate. Throwing sends the message to error/ with reason `handler` (your writes for it
   * are rolled back) and lets the rest of the batch commit; throwing a `TransientError` (the
   * system you need is down) sends it to deferred/ instead, to be tried again later (`defer`). Synchronous, as bun:sqlite's
   * transactions are: a handler that returns a promise is a handler failure. What it returns
   * (JSON-serialisable) is stored with the processed row, for `onOutcome` and `ledger.resultOf`.
   * Keep it to database work: a call to another system here cannot be rolled back.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a handler that returns nothing is the usual one
  readonly handle?: (message: Exact<T>, db: Database, delivery: Delivery) => Json | void
  /**
   * Start a new, empty ledger even though the queue has history (files in done/ or error/):
   * the messages it processed before are then unknown to it. Without this, such a queue with
   * no ledger (or an empty one) is refused.
   */
  readonly isNewLedgerAllowed?: boolean
}

/** How to build a consumer on a PostgreSQL ledger, for your own message type and business effect. */
export interface PostgresConsumerConfig<T extends Message> extends ConsumerOptions<T> {
  /** The ledger's `postgres://` URL; default `$SPOOL_LEDGER_URL`, as the commands' `--ledger`. */
  readonly ledger?: string
  /**
   * Creates or upgrades your tables in the ledger's database; runs in one transaction at open,
   * one consumer's at a time in the database (an advisory lock), so consumers started together
   * may all `CREATE TABLE IF NOT EXISTS`.
   */
  readonly setup?: (sql: SQL) => void | PromiseLike<void>
  /**
   * Applies a message the first time its msg_id is seen, inside the commit transaction: your
   * writes on `tx` (never on another connection) commit together with the processed row, or
   * not at all. Never called for a duplicate. Throwing (or rejecting) sends the message to
   * error/ with reason `handler` (its writes are rolled back to a savepoint of its own) and
   * lets the rest of the batch commit; a `TransientError` sends it to deferred/ instead (`defer`). What it returns or resolves to (JSON-serialisable) is
   * stored with the processed row, for `onOutcome` and `ledger.resultOf`. Keep it to database work.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a handler that returns nothing is the usual one
  readonly handle?: (message: Exact<T>, tx: SQL, delivery: Delivery) => Json | void | PromiseLike<Json | void>
}

/** A consumer bound to one queue and its SQLite ledger. Dispose it (or call close) when done. */
export interface SpoolConsumer extends Disposable {
  readonly queue: Queue
  readonly ledger: SqliteLedger
  /** Drains inbox/ once and rewrites the reports; stops at a batch boundary when `signal` aborts. */
  drain(signal?: AbortSignal): Promise<ConsumeSummary>
  /** Closes the ledger: now, or once the drains in flight have ended. */
  close(): void
}

/** A consumer bound to one queue and its PostgreSQL ledger. Dispose it (`await using`) or await close when done. */
export interface PostgresConsumer extends AsyncDisposable {
  readonly queue: Queue
  readonly ledger: PostgresLedger
  /** Drains inbox/ once and rewrites the reports; stops at a batch boundary when `signal` aborts. */
  drain(signal?: AbortSignal): Promise<ConsumeSummary>
  /** Waits for the drains in flight, then closes the ledger's connections. */
  close(): Promise<void>
}

/**
 * Builds a typed consumer on the SQLite ledger in the root: spool's claim/commit/move protocol
 * with your message type and a handler whose effects commit in the same transaction as the
 * idempotency record. A root bound to PostgreSQL, or `SPOOL_LEDGER_URL` set, is refused (exit 2):
 * that is `createPostgresConsumer`'s.
 */
export function createConsumer<T extends Message>(config: ConsumerConfig<T> = {}): SpoolConsumer {
  const queue = openQueue(resolveRoot(config.root))
  refuseOtherLedger(queue)
  const ledger = openSqliteLedger(queue, {
    durable: config.durable ?? true,
    ...(config.busyTimeoutMs !== undefined && { busyTimeoutMs: config.busyTimeoutMs }),
    ...(config.isNewLedgerAllowed !== undefined && { isNewLedgerAllowed: config.isNewLedgerAllowed }),
  })
  if (config.setup) {
    const setup = config.setup
    try {
      ledger.transaction(() => setup(ledger.db))
    } catch (error) {
      ledger.close()
      throw error
    }
  }
  const handle = config.handle
  const results = new Results(ledger, config.onOutcome)
  const effect: Effect | undefined = handle && ((o, db) => results.keep(o, handle(exactOf<T>(o), db, deliveryOf(o))))
  const drains = new Drains()
  const close = () => void drains.close(() => ledger.close())
  return {
    queue,
    ledger,
    drain: (signal) => drains.start(() => drainOnce(queue, ledger, config, effect, results, signal)),
    close,
    [Symbol.dispose]: close,
  }
}

/**
 * Builds a typed consumer on the PostgreSQL ledger at `ledger` (default `$SPOOL_LEDGER_URL`): the
 * same protocol, with a handler that runs in the commit transaction. Opened as every command
 * opens a ledger: a root bound to SQLite or to another PostgreSQL ledger is refused (exit 2)
 * before anything is created, and a root's first ledger is recorded as its own.
 */
export async function createPostgresConsumer<T extends Message>(
  config: PostgresConsumerConfig<T> = {},
): Promise<PostgresConsumer> {
  const queue = openQueue(resolveRoot(config.root))
  const url = resolveLedgerUrl(config.ledger)
  if (url === undefined)
    throw new SpoolError(
      "usage",
      `createPostgresConsumer needs its PostgreSQL ledger's URL: pass ledger: "postgres://..." or set SPOOL_LEDGER_URL. Nothing was opened or created`,
    )
  const ledger = await openPostgresLedger(queue, {
    url,
    ...(config.busyTimeoutMs !== undefined && { busyTimeoutMs: config.busyTimeoutMs }),
  })
  if (config.setup) {
    const setup = config.setup
    try {
      await ledger.transaction(async (tx) => {
        // One setup at a time in the database: consumers started together (on any root, any
        // host) would otherwise race on the same CREATE TABLE IF NOT EXISTS, which PostgreSQL
        // does not make safe (a duplicate key in pg_type). SQLite's setup runs under its write lock.
        await tx`SELECT pg_advisory_xact_lock(hashtext('spool-setup'))`
        await setup(tx)
      })
    } catch (error) {
      await ledger.close()
      throw error
    }
  }
  const handle = config.handle
  const results = new Results(ledger, config.onOutcome)
  const effect: PostgresEffect | undefined =
    handle && (async (o, tx) => results.keep(o, await handle(exactOf<T>(o), tx, deliveryOf(o))))
  const drains = new Drains()
  const close = () => drains.close(() => ledger.close())
  return {
    queue,
    ledger,
    drain: (signal) => drains.start(() => drainOnce(queue, ledger, config, effect, results, signal)),
    close,
    [Symbol.asyncDispose]: close,
  }
}

/**
 * Refuses (exit 2) to run a SQLite handler where the root or the process names a PostgreSQL
 * ledger: its effects would be deduplicated against a second, local ledger.
 */
function refuseOtherLedger(queue: Queue): void {
  const url = process.env.SPOOL_LEDGER_URL || undefined
  const bound = readBinding(queue.root)
  const isBoundToPostgres = bound?.binding.backend === "postgres"
  if (url === undefined && !isBoundToPostgres) return
  const why =
    url === undefined
      ? `this root (${queue.root}) is bound to a PostgreSQL ledger (${bound?.isRecorded ? bindingFile(queue.root) : "its .spool-root-id, and no ledger.db"})`
      : `SPOOL_LEDGER_URL names a PostgreSQL ledger (${redact(url)})`
  throw new SpoolError(
    "unsafe-ledger",
    `createConsumer runs its handler on the SQLite ledger in the root, but ${why}; build this consumer with createPostgresConsumer, whose handler runs on the PostgreSQL ledger${isBoundToPostgres ? "" : ", or unset SPOOL_LEDGER_URL for a SQLite root"}. Nothing was opened or created`,
  )
}

function deliveryOf(o: AcceptedOutcome): Delivery {
  return { file: o.name, msgId: o.msgId, payloadHash: o.hash }
}

/** The message with its amount as the exact decimal of its source spelling (`o.amount`). */
function exactOf<T extends Message>(o: AcceptedOutcome): Exact<T> {
  return { ...(o.message as T), amount: new Big(o.amount) }
}

/**
 * The results handlers returned in the commit in flight, by claim, and the outcomes told to
 * `onOutcome` once it committed: a redelivery's result is read back from the ledger.
 */
class Results {
  readonly #ledger: LedgerPort<never>
  readonly #onOutcome: ConsumerOptions<Message>["onOutcome"]
  readonly #returned = new Map<string, unknown>()

  constructor(ledger: LedgerPort<never>, onOutcome: ConsumerOptions<Message>["onOutcome"]) {
    this.#ledger = ledger
    this.#onOutcome = onOutcome
  }

  /** Keeps what a handler returned for its outcome, and returns it for the ledger to store. */
  keep(o: AcceptedOutcome, result: unknown): unknown {
    if (this.#onOutcome !== undefined) this.#returned.set(o.claimId, result)
    return result
  }

  /** The engine's onCommit: each accepted outcome's verdict and stored result, to onOutcome. */
  readonly committed = async (outcomes: readonly Outcome[], verdicts: readonly Verdict[]): Promise<void> => {
    const onOutcome = this.#onOutcome
    if (onOutcome === undefined) return
    try {
      for (const [i, o] of outcomes.entries()) {
        if (o.kind !== "accepted") continue
        const verdict = verdicts[i] as Verdict
        const result =
          verdict === "processed"
            ? parseResult(resultText(this.#returned.get(o.claimId)))
            : verdict === "duplicate" || verdict === "conflict"
              ? await this.#ledger.resultOf(o.msgId)
              : undefined
        await onOutcome({ file: o.name, msgId: o.msgId, verdict, result })
      }
    } finally {
      for (const o of outcomes) this.#returned.delete(o.claimId)
    }
  }
}

/** One drain: the engine with the consumer's settings, then the reports. */
async function drainOnce<T extends Message, E extends AnyEffect>(
  queue: Queue,
  ledger: LedgerPort<E>,
  config: ConsumerOptions<T>,
  effect: E | undefined,
  results: Results,
  signal: AbortSignal | undefined,
): Promise<ConsumeSummary> {
  const summary = await consume<T, E>({
    queue,
    ledger,
    ...(config.type && { type: config.type }),
    ...(effect && { effect }),
    ...(signal && { signal }),
    ...(config.batchSize !== undefined && { batchSize: config.batchSize }),
    ...(config.maxAttempts !== undefined && { maxAttempts: config.maxAttempts }),
    ...(config.maxBytes !== undefined && { maxBytes: config.maxBytes }),
    ...(config.minAgeMs !== undefined && { minAgeMs: config.minAgeMs }),
    ...(config.durable !== undefined && { durable: config.durable }),
    ...(config.defer && { defer: config.defer }),
    ...(config.log && { log: config.log }),
    ...(config.onOutcome && { onCommit: results.committed }),
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
class Drains {
  readonly #inFlight = new Set<Promise<unknown>>()
  #closing: Closing | undefined

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
