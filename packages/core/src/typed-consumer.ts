import type { Database } from "bun:sqlite"
import { checkBinding, readBinding, writeBinding } from "./binding.ts"
import { consume } from "./consume/engine.ts"
import type { ConsumeSummary } from "./consume/summary.ts"
import { SpoolError } from "./errors.ts"
import { type Effect, Ledger } from "./ledger.ts"
import { redact } from "./ledger-postgres.ts"
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

/** How to build a consumer for your own message type and business effect. */
export interface ConsumerConfig<T extends Message> {
  /** Queue root; default `$SPOOL_ROOT`, else `./spool`. */
  readonly root?: string
  /**
   * Your message type: an arktype type that includes spool's required fields, typically
   * `Message.and({ ... })`. Files it rejects go to error/ as missing-field or invalid-field.
   */
  readonly type?: MessageType<T>
  /** Creates or upgrades your tables in the ledger database; runs in one transaction at open. */
  readonly setup?: (db: Database) => void
  /**
   * Applies a message the first time its msg_id is seen, inside the ledger transaction: your
   * writes on `db` commit together with the processed row, or not at all. Never called for a
   * duplicate. Throwing sends the message to error/ with reason `handler` (your writes for it
   * are rolled back) and lets the rest of the batch commit. Keep it to database work: a call to
   * another system here cannot be rolled back.
   */
  readonly handle?: (message: T, db: Database, delivery: Delivery) => void
  readonly batchSize?: number
  readonly maxAttempts?: number
  readonly maxBytes?: number
  readonly minAgeMs?: number
  readonly durable?: boolean
  /**
   * Start a new, empty ledger even though the queue has history (files in done/ or error/):
   * the messages it processed before are then unknown to it. Without this, such a queue with
   * no ledger (or an empty one) is refused.
   */
  readonly isNewLedgerAllowed?: boolean
  readonly log?: Log
}

/** A consumer bound to one queue and ledger. Dispose it (or call close) when done. */
export interface SpoolConsumer extends Disposable {
  readonly queue: Queue
  readonly ledger: Ledger
  /** Drains inbox/ once and rewrites the reports; stops at a batch boundary when `signal` aborts. */
  drain(signal?: AbortSignal): Promise<ConsumeSummary>
  close(): void
}

/**
 * Builds a typed consumer: spool's claim/commit/move protocol with your message type and a
 * handler whose effects commit in the same transaction as the idempotency record.
 */
export function createConsumer<T extends Message>(config: ConsumerConfig<T> = {}): SpoolConsumer {
  const queue = openQueue(resolveRoot(config.root))
  // The handler writes on the SQLite ledger's database. A root bound to PostgreSQL, or a process
  // told to use one, is refused rather than deduplicated against a second, local ledger.
  const bound = readBinding(queue.root)
  const url = process.env.SPOOL_LEDGER_URL || undefined
  if (url !== undefined && bound?.binding.backend !== "sqlite")
    throw new SpoolError(
      "unsafe-ledger",
      `createConsumer runs its handler on the SQLite ledger in the root, but SPOOL_LEDGER_URL names a PostgreSQL ledger (${redact(url)}); unset it for a SQLite root, or consume this root with consume() and a PostgresEffect. Nothing was opened or created`,
    )
  checkBinding(queue.root, bound, undefined, undefined)
  const ledger = Ledger.open(queue.ledger, {
    durable: config.durable ?? true,
    ...(config.isNewLedgerAllowed !== undefined && { isNewLedgerAllowed: config.isNewLedgerAllowed }),
  })
  if (bound?.isRecorded !== true)
    try {
      writeBinding(queue.root, { backend: "sqlite" })
    } catch (error) {
      ledger.close()
      throw error
    }
  if (config.setup) {
    const setup = config.setup
    ledger.transaction(() => setup(ledger.db))
  }
  const handle = config.handle
  const close = () => ledger.close()
  return {
    queue,
    ledger,
    async drain(signal) {
      const summary = await consume<T, Effect>({
        queue,
        ledger,
        ...(config.type && { type: config.type }),
        ...(handle && {
          effect: ((o, db) =>
            handle(o.message as T, db, { file: o.name, msgId: o.msgId, payloadHash: o.hash })) satisfies Effect,
        }),
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
    },
    close,
    [Symbol.dispose]: close,
  }
}
