// What a broker still holds for a source: the messages waiting for its consumer and those
// delivered and not yet acknowledged, asked of the broker with a short timeout. The one module
// that names every adapter's reader, imported only when its scheme is asked for, as open.ts
// opens sources. Reading never fails: a broker that cannot be asked is an answer too.
import { withTimeout } from "../clock.ts"
import { SpoolError } from "../errors.ts"

/** The broker's backlog for one source, or why there is none to show. */
export type Backlog =
  | {
      readonly state: "read"
      /** Messages the broker holds for the consumer and has not delivered. */
      readonly waiting: number
      /** Delivered and not yet acknowledged; undefined where the broker does not say (see `note`). */
      readonly unacked: number | undefined
      /** What the figures are, in the broker's own words. */
      readonly what: string
      readonly note?: string
    }
  | { readonly state: "not-available"; readonly reason: string }
  | { readonly state: "unreachable"; readonly reason: string }

/** How long reading one broker's backlog may take, connection included. */
export const backlogTimeoutMs = 2000

/** The URL as the ledger keeps it for a delivery's origin: without its password. */
export async function describeSource(url: string): Promise<string> {
  return (await parserOf(url))(url)
}

/**
 * The backlog of the source `url` (with its password where the broker needs one), read within
 * `timeoutMs`; never throws. MQTT has no way to ask a broker what a session holds.
 */
export async function readBacklog(url: string, timeoutMs = backlogTimeoutMs): Promise<Backlog> {
  try {
    const scheme = schemeOf(url)
    if (scheme === "mqtt:" || scheme === "mqtts:")
      return {
        state: "not-available",
        reason: "MQTT has no way to ask the broker how many messages a session holds",
      }
    const read = await readerOf(url)
    return await withTimeout(read(url, timeoutMs), timeoutMs)
  } catch (error) {
    return { state: "unreachable", reason: error instanceof Error ? error.message : String(error) }
  }
}

type Reader = (url: string, timeoutMs: number) => Promise<Backlog>

async function readerOf(url: string): Promise<Reader> {
  switch (schemeOf(url)) {
    case "amqp:":
    case "amqps:":
      return (await import("./amqp/backlog.ts")).readAmqpBacklog
    case "nats:":
      return (await import("./nats/backlog.ts")).readJetStreamBacklog
    case "redis:":
    case "rediss:":
      return (await import("./redis/backlog.ts")).readRedisBacklog
    default:
      throw unknownScheme(url)
  }
}

async function parserOf(url: string): Promise<(url: string) => string> {
  switch (schemeOf(url)) {
    case "amqp:":
    case "amqps:": {
      const { parseAmqpUrl } = await import("./amqp/url.ts")
      return (u) => parseAmqpUrl(u).describe
    }
    case "nats:": {
      const { parseJetStreamUrl } = await import("./nats/url.ts")
      return (u) => parseJetStreamUrl(u).describe
    }
    case "redis:":
    case "rediss:": {
      const { parseRedisUrl } = await import("./redis/url.ts")
      return (u) => parseRedisUrl(u).describe
    }
    case "mqtt:":
    case "mqtts:": {
      const { parseMqttUrl } = await import("./mqtt/url.ts")
      return (u) => parseMqttUrl(u).describe
    }
    default:
      throw unknownScheme(url)
  }
}

function schemeOf(url: string): string | undefined {
  return /^([a-z][a-z0-9+.-]*:)/i.exec(url)?.[1]?.toLowerCase()
}

function unknownScheme(url: string): SpoolError {
  return new SpoolError(
    "usage",
    `${JSON.stringify(url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:]*):[^/@]*@/i, "$1:***@"))} is not a source URL: it starts amqp://, amqps://, nats://, redis://, rediss://, mqtt:// or mqtts://`,
  )
}
