import type { Database } from "bun:sqlite"
import type { SQL } from "bun"
import { bindingFile, readBinding } from "./binding.ts"
import { consume } from "./consume/engine.ts"
import type { ConsumeSummary } from "./consume/summary.ts"
import { SpoolError } from "./errors.ts"
import type { AcceptedOutcome, Effect, Ledger } from "./ledger.ts"
import { type AnyEffect, type LedgerPort, openLedger, openSqliteLedger, resolveLedgerUrl } from "./ledger-port.ts"
import { type PostgresEffect, type PostgresLedger, redact } from "./ledger-postgres.ts"
import type { Log } from "./log.ts"
import type { Message, MessageType } from "./message.ts"
import { openQueue, type Queue, resolveRoot } from "./queue.ts"
import { writeReports } from "./reports.ts"

/** Which delivery a handler is applying. */
export interface Delivery {
  readonly file: string
  readonly msgId: string
  /** sha256 of the file's bytes. */
  readonly payloadHash: string
}

/** What a typed consumer is told on either ledger: the queue, the message type and consume's settings. */
export interface ConsumerOptions<T extends Message> {
  /** Queue root; default `$SPOOL_ROOT`, else `./spool`. */
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
  readonly log?: Log
}

/** How to build a consumer on the SQLite ledger in the root, for your own message type and business effect. */
export interface ConsumerConfig<T extends Message> extends ConsumerOptions<T> {
  /** Creates or upgrades your tables in the ledger database; runs in one transaction at open. */
  readonly setup?: (db: Database) => void
  /**
   * Applies a message the first time its msg_id is seen, inside the ledger transaction: your
   * writes on `db` commit together with the processed row, or not at all. Never called for a
   * duplicate. Throwing sends the message to error/ with reason `handler` (your writes for it
   * are rolled back) and lets the rest of the batch commit. Synchronous, as bun:sqlite's
   * transactions are: a handler that returns a promise is a handler failure. Keep it to database
   * work: a call to another system here cannot be rolled back.
   */
  readonly handle?: (message: T, db: Database, delivery: Delivery) => void
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
  /** Creates or upgrades your tables in the ledger's database; runs in one transaction at open. */
  readonly setup?: (sql: SQL) => void | PromiseLike<void>
  /**
   * Applies a message the first time its msg_id is seen, inside the commit transaction: your
   * writes on `tx` (never on another connection) commit together with the processed row, or
   * not at all. Never called for a duplicate. Throwing (or rejecting) sends the message to
   * error/ with reason `handler` (its writes are rolled back to a savepoint of its own) and
   * lets the rest of the batch commit. Keep it to database work.
   */
  readonly handle?: (message: T, tx: SQL, delivery: Delivery) => void | PromiseLike<void>
}

/** A consumer bound to one queue and its SQLite ledger. Dispose it (or call close) when done. */
export interface SpoolConsumer extends Disposable {
  readonly queue: Queue
  readonly ledger: Ledger
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
  const effect: Effect | undefined =
    handle &&
    ((o, db) => {
      const result: unknown = handle(o.message as T, db, deliveryOf(o))
      if (typeof (result as PromiseLike<unknown> | undefined)?.then === "function")
        throw new Error(
          "the handler returned a promise: on the SQLite ledger it must be synchronous (its writes after an await would land outside the transaction)",
        )
    })
  const drains = new Drains()
  const close = () => void drains.close(() => ledger.close())
  return {
    queue,
    ledger,
    drain: (signal) => drains.start(() => drainOnce(queue, ledger, config, effect, signal)),
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
  const ledger = await openLedger(queue, { url })
  if (config.setup) {
    const setup = config.setup
    try {
      await ledger.transaction(async (tx) => {
        await setup(tx)
      })
    } catch (error) {
      await ledger.close()
      throw error
    }
  }
  const handle = config.handle
  const effect: PostgresEffect | undefined = handle && (async (o, tx) => handle(o.message as T, tx, deliveryOf(o)))
  const drains = new Drains()
  const close = () => drains.close(() => ledger.close())
  return {
    queue,
    ledger,
    drain: (signal) => drains.start(() => drainOnce(queue, ledger, config, effect, signal)),
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

/** One drain: the engine with the consumer's settings, then the reports. */
async function drainOnce<T extends Message, E extends AnyEffect>(
  queue: Queue,
  ledger: LedgerPort<E>,
  config: ConsumerOptions<T>,
  effect: E | undefined,
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
