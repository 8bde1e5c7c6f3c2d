import type { Database } from "bun:sqlite"
import Big from "big.js"
import type { SQL } from "bun"
import { type ConsumeSummary, emptySummary } from "./consume/summary.ts"
import { SpoolError } from "./errors.ts"
import { bindingFile, readBinding } from "./ledger/binding.ts"
import type { AcceptedOutcome } from "./ledger/model.ts"
import { openPostgresLedger, openSqliteLedger, resolveLedgerUrl } from "./ledger/open.ts"
import { type PostgresEffect, type PostgresLedger, redact } from "./ledger/postgres/ledger.ts"
import type { Effect, SqliteLedger } from "./ledger/sqlite/ledger.ts"
import { type LibraryLog, type LogFunction, type Logger, logThrough } from "./logger.ts"
import type { Message, MessageType } from "./message/validate.ts"
import { openQueue, type Queue, resolveRoot } from "./queue/root.ts"
import type { SourcePort } from "./source/port.ts"
import { type DeferPolicy, deferPolicyOf } from "./transient.ts"
import { ConsumerSource, type DrainSettings, Drains, drainOnce, type HandledOutcome, Results } from "./typed-drain.ts"

export type { HandledOutcome } from "./typed-drain.ts"

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
   * Consume a broker instead of inbox/: a source URL as `spool consume --source` takes
   * (`amqp://USER:PASS@HOST:5672/?queue=Q`, `nats://HOST:4222/?stream=S&consumer=C`,
   * `redis://HOST:6379/?stream=S&group=G`, `mqtt://HOST:1883/?topic=F&client=ID`), opened at
   * the first drain and closed with the consumer, or a source you opened (`openSource`), which
   * stays yours to close. Each delivery lands as a file in the root and is acknowledged once
   * its outcome is committed; the root keeps the ledger, error/, deferred/ and the reports.
   */
  readonly source?: string | SourcePort
  /** With a source: a drain ends once the source has had nothing for this long (ms, default 1 s). */
  readonly idleWaitMs?: number
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
  /**
   * Where the consumer logs: a pino-compatible logger (`{ debug, info, warn }`, each called as
   * `(fields, msg)`; a pino logger as it is) or a function `(level, msg, fields)`. Default: silent.
   */
  readonly logger?: Logger | LogFunction
  /** watch() of inbox/: drain at least this often without a file-system event (ms, default 5000). */
  readonly rescanMs?: number
  /** watch() of inbox/: after a new file, wait this long before taking it (ms, default 0: what arrives during a commit is taken in the next batch). */
  readonly batchWindowMs?: number
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
export interface SpoolConsumer extends Disposable, AsyncDisposable {
  readonly queue: Queue
  readonly ledger: SqliteLedger
  /**
   * Drains inbox/ (or the source, until it has had nothing for `idleWaitMs`) once and rewrites
   * the reports; stops at a batch boundary when `signal` aborts.
   */
  drain(signal?: AbortSignal): Promise<ConsumeSummary>
  /**
   * Consumes until `signal` aborts, then finishes the batch in hand and rewrites the reports:
   * inbox/ drained again whenever a file arrives (or every `rescanMs`, or when a deferred file
   * falls due), as `consume --watch`; with a source, its deliveries received and acknowledged.
   * One drain or watch at a time on a source.
   */
  watch(signal: AbortSignal): Promise<ConsumeSummary>
  /**
   * Closes the ledger (and a source opened from a URL): now, or once the drains in flight have
   * ended. `await using` (or awaiting `[Symbol.asyncDispose]()`) waits for it.
   */
  close(): void
}

/** A consumer bound to one queue and its PostgreSQL ledger. Dispose it (`await using`) or await close when done. */
export interface PostgresConsumer extends AsyncDisposable {
  readonly queue: Queue
  readonly ledger: PostgresLedger
  /** Drains inbox/ (or the source, until idle) once and rewrites the reports; stops at a batch boundary when `signal` aborts. */
  drain(signal?: AbortSignal): Promise<ConsumeSummary>
  /** Consumes inbox/ (or the source) until `signal` aborts, as SpoolConsumer's watch. */
  watch(signal: AbortSignal): Promise<ConsumeSummary>
  /**
   * Ends the watches in flight (each finishes its batch in hand, as when its signal aborts) and
   * waits for them and the drains in flight, then closes the source opened from a URL and the
   * ledger's connections.
   */
  close(): Promise<void>
}

/**
 * Builds a typed consumer on the SQLite ledger in the root: spool's claim/commit/move protocol
 * with your message type and a handler whose effects commit in the same transaction as the
 * idempotency record. A root bound to PostgreSQL, or `SPOOL_LEDGER_URL` set, is refused (exit 2):
 * that is `createPostgresConsumer`'s.
 */
export function createConsumer<T extends Message>(config: ConsumerConfig<T> = {}): SpoolConsumer {
  checkOptions(config, "createConsumer")
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
  const settings = drainSettings(config)
  const results = new Results(ledger, config.onOutcome, settings.log)
  const effect: Effect | undefined =
    handle &&
    ((o, db) =>
      results.keep(
        o,
        results.attempt(o, () => handle(exactOf<T>(o), db, deliveryOf(o))),
      ))
  const drains = new Drains()
  const source = new ConsumerSource(config.source, settings.log, queue.root)
  const closing = () =>
    drains.close(async () => {
      try {
        await source.close()
      } finally {
        ledger.close()
      }
    })
  const run = runner(drains, source, (r) => drainOnce(queue, ledger, settings, effect, results, r))
  return {
    queue,
    ledger,
    ...run,
    close: () => void closing(),
    [Symbol.dispose]: () => void closing(),
    [Symbol.asyncDispose]: closing,
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
  checkOptions(config, "createPostgresConsumer")
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
  const settings = drainSettings(config)
  const results = new Results(ledger, config.onOutcome, settings.log)
  const effect: PostgresEffect | undefined =
    handle &&
    (async (o, tx) => results.keep(o, await results.attemptAsync(o, () => handle(exactOf<T>(o), tx, deliveryOf(o)))))
  const drains = new Drains()
  const source = new ConsumerSource(config.source, settings.log, queue.root)
  const close = () =>
    drains.close(async () => {
      try {
        await source.close()
      } finally {
        await ledger.close()
      }
    })
  const run = runner(drains, source, (r) => drainOnce(queue, ledger, settings, effect, results, r))
  return { queue, ledger, ...run, close, [Symbol.asyncDispose]: close }
}

type Run = Parameters<typeof drainOnce>[5]

/** A consumer's drain and watch: one at a time on a source (its deliveries in hand are one batch's). */
function runner(
  drains: Drains,
  source: ConsumerSource,
  drain: (run: Run) => Promise<ConsumeSummary>,
): Pick<SpoolConsumer, "drain" | "watch"> {
  const start = (signal: AbortSignal | undefined, untilStopped: boolean) => {
    if (source.isSet && drains.isDraining)
      return Promise.reject(
        new SpoolError("usage", "this consumer is already draining its source; one drain or watch at a time"),
      )
    return drains.start(async () => {
      // A watch ends at close() too; a one-shot drain is waited for.
      const stop = untilStopped ? AbortSignal.any([drains.stopping, ...(signal ? [signal] : [])]) : signal
      let port: SourcePort | undefined
      try {
        port = await source.port(stop)
      } catch (error) {
        // Stopped while the broker was out of reach: nothing was received, and nothing is.
        if (stop?.aborted) return emptySummary()
        throw error
      }
      return drain({ ...(stop && { signal: stop }), ...(port && { source: port }), untilStopped })
    })
  }
  return {
    drain: (signal) => start(signal, false),
    watch: (signal) => start(signal, true),
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

/** What each numeric option must be: a whole number of at least `min`, or any number of at least `min` (`above`: more than it). */
const numericOptions = {
  batchSize: { whole: true, min: 1 },
  maxAttempts: { whole: true, min: 1 },
  maxBytes: { whole: true, min: 0 },
  minAgeMs: { whole: false, min: 0 },
  busyTimeoutMs: { whole: false, min: 0 },
  idleWaitMs: { whole: false, min: 0 },
  rescanMs: { whole: false, min: 0, above: true },
  batchWindowMs: { whole: false, min: 0 },
} as const

/**
 * Refuses (a usage error, before anything is opened) an option no drain could run with: a
 * batch size of 2.5 failed deep in SQLite as "datatype mismatch", and a first deferral delay of
 * 0 took a failing message again and again within one drain.
 */
function checkOptions(config: ConsumerOptions<Message>, where: string): void {
  for (const [key, rule] of Object.entries(numericOptions)) {
    const v: unknown = config[key as keyof typeof numericOptions]
    if (v === undefined) continue
    const isValid =
      typeof v === "number" &&
      Number.isFinite(v) &&
      (!rule.whole || Number.isInteger(v)) &&
      ("above" in rule ? v > rule.min : v >= rule.min)
    if (!isValid)
      throw new SpoolError(
        "usage",
        `${where}: ${key} must be ${rule.whole ? "a whole number" : "a finite number"} ${"above" in rule ? "above" : "of at least"} ${rule.min} (was ${typeof v === "string" ? JSON.stringify(v) : String(v)})`,
      )
  }
  deferPolicyOf(config.defer, where)
}

/** The consumer's settings for each drain, its logger turned into spool's log. */
function drainSettings<T extends Message>(config: ConsumerOptions<T>): DrainSettings<T> & { log?: LibraryLog } {
  const { logger, ...rest } = config
  return { ...rest, ...(logger && { log: logThrough(logger) }) }
}

function deliveryOf(o: AcceptedOutcome): Delivery {
  return { file: o.name, msgId: o.msgId, payloadHash: o.hash }
}

/** The message with its amount as the exact decimal of its source spelling (`o.amount`). */
function exactOf<T extends Message>(o: AcceptedOutcome): Exact<T> {
  return { ...(o.message as T), amount: new Big(o.amount) }
}
