// The `--source` URL of a RabbitMQ queue, e.g. `amqp://guest:guest@127.0.0.1:5672/?queue=orders`.
//
// Everything but the query is amqplib's own reading of an AMQP URI: `amqp:` or `amqps:` (TLS),
// user and password (percent-encoded; both absent means guest/guest), host, port (5672, or 5671
// for amqps), and the virtual host as the path without its leading slash, percent-decoded:
// `amqp://host/` and `amqp://host` are the default vhost `/`, `amqp://host/prod` is `prod`, and
// `amqp://host/%2f` is `/` written out.
//
// Query parameters:
// - `queue` (required): the queue to consume from and to publish replays to. It must exist: the
//   source never declares it, because its type (classic or quorum), durability and arguments
//   are the operator's topology, not spool's.
// - `heartbeat`, `frameMax`, `channelMax`, `locale`, `maxFrameSize`: passed to amqplib as
//   they are (heartbeat in seconds; absent: the broker's suggestion, 60 s for RabbitMQ).
// Any other parameter is refused, so that a misspelt one is not silently ignored.
import { SpoolError } from "../../errors.ts"

const clientParameters = ["heartbeat", "frameMax", "channelMax", "locale", "maxFrameSize"] as const

/** A parsed AMQP source URL. */
export interface AmqpUrl {
  /** What amqplib connects to: the URL without spool's own parameters. */
  readonly connectUrl: string
  /** The queue the source consumes from. */
  readonly queue: string
  /** The URL without its password, for logs, errors and a delivery's origin. */
  readonly describe: string
}

/** Reads an `amqp://` or `amqps://` source URL; a SpoolError("usage") says what to write instead. */
export function parseAmqpUrl(text: string): AmqpUrl {
  const example = "amqp://guest:guest@127.0.0.1:5672/?queue=orders"
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new SpoolError("usage", `${describeUnparsed(text)} is not a URL; write it as ${example}`)
  }
  if (url.protocol !== "amqp:" && url.protocol !== "amqps:")
    throw new SpoolError("usage", `${describeUrl(url)} is not an AMQP URL: it must start amqp:// or amqps://`)
  if (url.hostname === "") throw new SpoolError("usage", `${describeUrl(url)} names no host; write it as ${example}`)
  const queues = url.searchParams.getAll("queue")
  const queue = queues[0]
  if (queue === undefined || queue === "")
    throw new SpoolError(
      "usage",
      `${describeUrl(url)} names no queue: add ?queue=NAME (e.g. ${example}); the queue must already exist`,
    )
  if (queues.length > 1)
    throw new SpoolError("usage", `${describeUrl(url)} names more than one queue: a source consumes from one`)
  const unknown = [...new Set(url.searchParams.keys())].filter(
    (key) => key !== "queue" && !(clientParameters as readonly string[]).includes(key),
  )
  if (unknown.length > 0)
    throw new SpoolError(
      "usage",
      `${describeUrl(url)} has a parameter an AMQP source does not know (${unknown.join(", ")}); ` +
        `it takes queue (required), ${clientParameters.join(", ")}`,
    )
  // amqplib takes these as numbers; one that is not would fail every connection attempt, each
  // taken for a broker out of reach, until the 60 s of retries ran out.
  for (const key of ["heartbeat", "frameMax", "channelMax", "maxFrameSize"])
    for (const value of url.searchParams.getAll(key))
      if (!/^\d+$/.test(value))
        throw new SpoolError(
          "usage",
          `${describeUrl(url)}: ${key} takes a whole number${key === "heartbeat" ? " of seconds" : ""}, not ${JSON.stringify(value)}`,
        )
  const connect = new URL(url.href)
  connect.searchParams.delete("queue")
  return { connectUrl: connect.href, queue, describe: describeUrl(url) }
}

/** The vhost amqplib opens for this URL, as it reads the path. */
export function vhostOf(url: AmqpUrl): string {
  const path = new URL(url.connectUrl).pathname.slice(1)
  return path === "" ? "/" : decodeURIComponent(path)
}

function describeUrl(url: URL): string {
  const shown = new URL(url.href)
  shown.password = ""
  return shown.href
}

// An unparsable URL may still hold a password: hide whatever sits between "//user:" and "@".
function describeUnparsed(text: string): string {
  return JSON.stringify(text.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*):[^@/]*@/i, "$1@"))
}
