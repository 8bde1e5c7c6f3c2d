// The one module that names every source adapter: `--source URL` picks one by its scheme. Each
// adapter is imported only when its scheme is asked for, so a file queue never loads a broker
// client (amqplib, the NATS clients, MQTT.js).
import { SpoolError } from "../errors.ts"
import type { Log } from "../log.ts"
import type { SourcePort } from "./port.ts"

/** What opening a source may be told, whichever its transport. */
export interface OpenSourceOptions {
  /** Where a broker adapter reports lost connections and reconnections. */
  readonly log?: Log
  /** The connection's name on the broker (its management UI, `rabbitmqctl`, NATS monitoring). */
  readonly name?: string
  /** The queue root deliveries land in, where a broker names its consumers (Redis): one name per host and root. */
  readonly root?: string
  /**
   * Ends the open while it waits for a broker out of reach (every adapter waits up to 60 s for one
   * at the start): it then closes what it opened and rejects with the signal's reason.
   */
  readonly signal?: AbortSignal
}

/** The schemes `openSource` takes, for messages that list them. */
export const sourceSchemes = ["amqp:", "amqps:", "nats:", "redis:", "rediss:", "mqtt:", "mqtts:"] as const

/**
 * Opens the source of `url`: `amqp://` or `amqps://` a RabbitMQ queue (`?queue=Q`), `nats://` a
 * JetStream durable pull consumer (`?stream=S&consumer=C`), `redis://` or `rediss://` a Redis stream
 * read through a consumer group (`?stream=S&group=G`), `mqtt://` or `mqtts://` an MQTT 5 persistent
 * session's QoS 1 subscription (`?topic=F&client=ID`). Any other URL is a usage error.
 */
export async function openSource(url: string, options: OpenSourceOptions = {}): Promise<SourcePort> {
  const scheme = schemeOf(url)
  switch (scheme) {
    case "amqp:":
    case "amqps:": {
      const { openAmqpSource } = await import("./amqp/source.ts")
      return openAmqpSource(url, {
        ...waitOf(options),
        ...(options.log !== undefined ? { log: options.log } : {}),
        ...(options.name !== undefined ? { connectionName: options.name } : {}),
      })
    }
    case "nats:": {
      const { openJetStreamSource } = await import("./nats/source.ts")
      return openJetStreamSource(url, {
        ...waitOf(options),
        ...(options.log !== undefined ? { log: options.log } : {}),
        ...(options.name !== undefined ? { name: options.name } : {}),
      })
    }
    case "mqtt:":
    case "mqtts:": {
      const { openMqttSource } = await import("./mqtt/source.ts")
      return openMqttSource(url, { ...waitOf(options), ...(options.log !== undefined ? { log: options.log } : {}) })
    }
    case "redis:":
    case "rediss:": {
      const { openRedisSource } = await import("./redis/source.ts")
      return openRedisSource(url, {
        ...waitOf(options),
        ...(options.log !== undefined ? { log: options.log } : {}),
        ...(options.name !== undefined ? { connectionName: options.name } : {}),
        ...(options.root !== undefined ? { root: options.root } : {}),
      })
    }
    default:
      throw new SpoolError(
        "usage",
        `--source ${JSON.stringify(redact(url))}: ${scheme === undefined ? "not a URL" : `unknown scheme ${scheme}`}; write amqp://USER:PASS@HOST:5672/?queue=QUEUE (RabbitMQ), nats://HOST:4222/?stream=STREAM&consumer=NAME (NATS JetStream), redis://HOST:6379/?stream=STREAM&group=GROUP (Redis Streams) or mqtt://HOST:1883/?topic=FILTER&client=ID (MQTT)`,
      )
  }
}

function waitOf(options: OpenSourceOptions): { signal?: AbortSignal } {
  return options.signal !== undefined ? { signal: options.signal } : {}
}

function schemeOf(url: string): string | undefined {
  const match = /^([a-z][a-z0-9+.-]*:)/i.exec(url)
  return match?.[1]?.toLowerCase()
}

/** The URL as an error may print it: a password is never echoed. */
function redact(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:]*):[^/@]*@/i, "$1:***@")
}
