// The source port: where a broker's deliveries come from and how they are acknowledged; each
// broker is a folder of its own beside this file. The engine takes every source through one
// loop and one intake port (consume/intake.ts), whose adapters are the directory queue
// (consume/directory.ts) and any SourcePort here (consume/source-loop.ts): a batch is received,
// landed as claimed files, decided and committed in the ledger, moved, and only then acknowledged
// here: a crash before the ack makes the source deliver again, and the ledger makes that harmless.
//
// How a Kafka source would map (not built: no broker runs where spool is tested): a delivery's
// id is `topic/partition/offset`; `ack` commits, per partition, the highest offset below which
// every delivery is acknowledged (contiguous offsets only, after the ledger commit); `release`
// seeks the partition back to its lowest unacknowledged offset; on a rebalance the source drains
// the batch in hand (commit, then ack) before it gives the partition up.

import type { RejectReason } from "../message/decode.ts"

/** Where a delivery came from: enough to show it to an operator and to publish it back. */
export interface Origin {
  /** The source's URL without its password, e.g. `amqp://guest@127.0.0.1:5672/?queue=orders`. */
  readonly source: string
  /** The address a replay publishes to: the AMQP queue, the JetStream subject. */
  readonly address: string
  /** Transport headers kept for a replay (AMQP properties.headers, NATS headers), text only. */
  readonly headers?: Readonly<Record<string, string>>
  /** The message's own id where the transport carries one beside the headers (AMQP `message-id`), published back with it. */
  readonly messageId?: string
}

/**
 * The header a replay publishes a failed message back with: the claim id of the failure it
 * replays. A delivery carrying it takes its identity from it (each adapter's `id`), not from
 * the original message-id or a new stream sequence, so the republished message lands under a
 * name of its own (never the failed one's, which the ledger would take for a redelivery of that
 * failure), and a second publish of the same replay (after a crash between the broker's confirm
 * and the file's removal) is recognised as that message again and processed once.
 */
export const replayHeader = "spool-replay-of"

/** One delivery of one message, as the source handed it over. */
export interface Delivery {
  /**
   * The message's identity at its source, the same on every redelivery of this message and
   * different for a message published again: the JetStream stream sequence, the AMQP
   * `message-id` property (absent: see `stableId`). Written into the ledger where a file queue
   * writes the file's name, so that a delivery redelivered after its commit is recognised.
   */
  readonly id: string
  /** false where the source has no id that survives a redelivery (an AMQP message without `message-id`). */
  readonly stableId: boolean
  /** The body's bytes, exactly as published. */
  readonly body: Uint8Array
  /** How many times the source has delivered it, this delivery included, where it counts (JetStream `num_delivered`, a quorum queue's `x-delivery-count` + 1). */
  readonly deliveryCount: number | undefined
  /** The source says an earlier delivery of it was not acknowledged (AMQP `redelivered`, a count above 1). */
  readonly redelivered: boolean
  readonly origin: Origin
  /** What the source's keeper refreshes to keep this delivery in hand (JetStream's reply subject, a Redis entry id); absent where the source has no keeper. */
  readonly keepToken?: string
  /**
   * Why the source could not take a message out of what the broker holds (a Redis entry without
   * its `body` field): the delivery lands with the broker's record as its body and is rejected
   * with this reason and detail, instead of stopping the batch.
   */
  readonly refusal?: { readonly reason: RejectReason; readonly detail: string }
}

/**
 * A keeper keeps deliveries in hand from another thread. The engine's handler and commit may hold
 * the main thread (bun:sqlite is synchronous) longer than a source's window, and a timer there
 * would not fire; so a source whose keep-alive any connection may send names a module that the
 * engine loads in a `Worker` of its own, started at the first batch and terminated when the run
 * ends. The worker calls the module's `openKeeper(options)` (a `KeeperModule`), which opens its own
 * connection, and then `keep` with the tokens of every batch in hand (`Delivery.keepToken`) every
 * `keepAliveWithinMs / 3`, whatever the main thread is doing. JetStream's keeper publishes `+WPI`
 * to each reply subject; the Redis Streams keeper `XCLAIM`s each entry id to the same consumer
 * name, `JUSTID`. Until the keeper is open, and should it fail or die (logged), the engine calls
 * `SourcePort.keepAlive` from the main thread instead, so a source with a keeper implements that
 * too: at worst a delivery comes again, which the ledger makes harmless. A round may cross the
 * ack of a batch it was told to drop, so keeping a delivery already acknowledged must be harmless.
 * The module must import nothing of the engine, and `options` hold nothing it could not clone.
 */
export interface KeeperSpec {
  /** Absolute path of the module the worker imports. */
  readonly module: string
  /** Given to its `openKeeper` as they are: structured-cloneable (connection settings, credentials). */
  readonly options: unknown
}

/** What a keeper module exports, for the worker that runs it. */
export interface KeeperModule {
  openKeeper(options: unknown): Promise<Keeper>
}

/** A keeper's connection, open in the worker. */
export interface Keeper {
  /** Restarts the source's window for each token; resolves once the broker has them. */
  keep(tokens: readonly string[]): Promise<void>
  close(): Promise<void>
}

/**
 * A source of deliveries: one adapter per transport, all used the same way by the engine, and all
 * held to the same behaviour by the source contract (`contract.test.ts` beside this file).
 */
export interface SourcePort {
  /** The source's URL without its password, for logs and errors. */
  readonly describe: string
  /**
   * Up to `max` deliveries. Waits at most `waitMs` for the first one, then takes what is there
   * without waiting for more; [] when nothing came in time (a drain ends on that). Never holds
   * more than `max` unacknowledged deliveries in memory (no prefetched backlog ageing out).
   * Lost connections are re-established with backoff inside; `signal` ends the wait early.
   */
  receive(max: number, waitMs: number, signal?: AbortSignal): Promise<Delivery[]>
  /**
   * Acknowledges deliveries whose outcome the ledger has committed: the source forgets them.
   * Resolves once the source has confirmed, where it can (JetStream's double ack); an ack the
   * source cannot take any more (its channel closed) is not an error: the message comes again
   * and the ledger recognises it.
   */
  ack(deliveries: readonly Delivery[]): Promise<void>
  /**
   * Hands deliveries back unacknowledged, to be delivered again (a stop before the commit); with
   * `delayMs`, no sooner than that where the source can delay a redelivery (JetStream's delayed
   * nak), at once where it cannot (AMQP). A Redis entry is due again after the delay or the lease,
   * whichever is shorter (its idle time cannot go below zero).
   */
  release(deliveries: readonly Delivery[], delayMs?: number): Promise<void>
  /** Keeps deliveries in hand from being redelivered to another consumer meanwhile (JetStream `working()`); a no-op where holding them is enough. */
  keepAlive(deliveries: readonly Delivery[]): Promise<void>
  /**
   * How long a delivery in hand stays this consumer's without `keepAlive` (JetStream's
   * `ack_wait`); undefined where holding it is enough. The engine calls keepAlive well within it.
   */
  readonly keepAliveWithinMs?: number
  /** Where the source keeps its deliveries alive from a thread of its own (see `KeeperSpec`); absent, the engine calls `keepAlive` from the main thread. */
  readonly keeper?: KeeperSpec
  /** Publishes `body` to `origin.address` and resolves once the broker confirmed it (replay). */
  publish(origin: Origin, body: Uint8Array): Promise<void>
  /** Ends for good: acks already sent are flushed, then the connection closes. */
  close(): Promise<void>
}
