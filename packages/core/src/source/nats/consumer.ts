// The durable pull consumer a JetStream source reads through: created when missing, used as it
// is when it exists, refused when its acknowledgements could lose a message.
import {
  AckPolicy,
  type ConsumerConfig,
  type ConsumerInfo,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  ReplayPolicy,
} from "@nats-io/jetstream"
import { nanos } from "@nats-io/transport-node"
import { SpoolError } from "../../errors.ts"
import type { JetStreamUrl } from "./url.ts"

/**
 * The configuration of a consumer spool creates. Explicit acks, because spool acks each delivery
 * only after its ledger commit; unlimited deliveries, because spool counts attempts itself and
 * moves a poison delivery to error/ (a server-side max_deliver would drop it silently instead);
 * every message of the stream from its first, because the consumer may be created after the
 * producers started; `ack_wait` short enough that a message lost in a dropped connection comes
 * back soon, while `working()` keeps a batch in hand alive for as long as it takes.
 */
export function consumerConfig(name: string, ackWaitMs: number): Partial<ConsumerConfig> {
  return {
    durable_name: name,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(ackWaitMs),
    max_deliver: -1,
    deliver_policy: DeliverPolicy.All,
    replay_policy: ReplayPolicy.Instant,
  }
}

/** Checks the stream, then returns the durable consumer's info, creating it with `consumerConfig` when missing. */
export async function ensureConsumer(
  jsm: JetStreamManager,
  url: JetStreamUrl,
  ackWaitMs: number,
): Promise<ConsumerInfo> {
  try {
    await jsm.streams.info(url.stream)
  } catch (cause) {
    if (isApiError(cause, JetStreamApiCodes.StreamNotFound))
      throw new SpoolError(
        "usage",
        `the JetStream stream "${url.stream}" does not exist at ${url.describe}: create it ` +
          `(nats stream add ${url.stream} --subjects '${url.stream.toLowerCase()}.>') or name an existing one in ?stream=`,
        { cause },
      )
    throw cause
  }
  const existing = await consumerInfo(jsm, url)
  if (existing !== undefined) return checked(existing, url)
  try {
    return checked(await jsm.consumers.add(url.stream, consumerConfig(url.consumer, ackWaitMs)), url)
  } catch (cause) {
    // Another process created it between our look and our add: use theirs, as any existing one.
    const raced = await consumerInfo(jsm, url)
    if (raced !== undefined) return checked(raced, url)
    throw cause
  }
}

async function consumerInfo(jsm: JetStreamManager, url: JetStreamUrl): Promise<ConsumerInfo | undefined> {
  try {
    return await jsm.consumers.info(url.stream, url.consumer)
  } catch (cause) {
    if (isApiError(cause, JetStreamApiCodes.ConsumerNotFound)) return undefined
    throw cause
  }
}

function checked(info: ConsumerInfo, url: JetStreamUrl): ConsumerInfo {
  const { config } = info
  const fix = `delete it (nats consumer rm ${url.stream} ${url.consumer}) to let spool create it, or name another in &consumer=`
  if (config.deliver_subject !== undefined && config.deliver_subject !== "")
    throw new SpoolError(
      "usage",
      `the consumer "${url.consumer}" at ${url.describe} is a push consumer; spool reads a pull consumer: ${fix}`,
    )
  if (config.ack_policy !== AckPolicy.Explicit)
    throw new SpoolError(
      "usage",
      `the consumer "${url.consumer}" at ${url.describe} has ack_policy ${config.ack_policy}; spool acknowledges ` +
        `each delivery after its commit and needs ack_policy explicit: ${fix}`,
    )
  return info
}

/** Whether `error` is the JetStream API's answer with this error code. */
export function isApiError(error: unknown, code: number): boolean {
  return error instanceof JetStreamApiError && error.code === code
}
