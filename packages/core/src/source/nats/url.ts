// The JetStream source's URL: nats://[user:password@ | token@]host[:port]/?stream=S&consumer=C.
import { SpoolError } from "../../errors.ts"

/** A parsed JetStream source URL: where to connect, how to log in, which stream and durable consumer. */
export interface JetStreamUrl {
  /** `host:port`, as the client's `servers` option takes it. */
  readonly server: string
  readonly user?: string
  readonly pass?: string
  /** A NATS token, written where a user name goes (`nats://TOKEN@host`). */
  readonly token?: string
  readonly stream: string
  readonly consumer: string
  /** The URL without its password or token, for logs, errors and a delivery's origin. */
  readonly describe: string
}

const example = "nats://127.0.0.1:4222/?stream=ORDERS&consumer=spool"
const parameters = new Set(["stream", "consumer"])
// JetStream names become subject tokens and file names on the server.
const validName = /^[^\s.*>/\\]+$/

/** Parses a `nats://` source URL; a SpoolError("usage") says what to write when something is missing. */
export function parseJetStreamUrl(text: string): JetStreamUrl {
  let url: URL
  try {
    url = new URL(text)
  } catch (cause) {
    throw usage(`"${text}" is not a URL: write it as ${example}`, cause)
  }
  if (url.protocol !== "nats:")
    throw usage(`a JetStream source URL starts with nats:// (got ${url.protocol}//): ${example}`)
  if (url.hostname === "") throw usage(`the source URL names no host: ${example}`)
  if (url.pathname !== "" && url.pathname !== "/")
    throw usage(`the source URL has a path (${url.pathname}); stream and consumer go in the query: ${example}`)
  for (const key of url.searchParams.keys())
    if (!parameters.has(key))
      throw usage(`unknown parameter "${key}" in the source URL (known: stream, consumer): ${example}`)
  const stream = required(url, "stream", "the JetStream stream to read, e.g. ?stream=ORDERS")
  const consumer = required(url, "consumer", "the durable pull consumer to read through, e.g. &consumer=spool")
  const user = decodeURIComponent(url.username)
  const pass = decodeURIComponent(url.password)
  const port = url.port === "" ? "4222" : url.port
  const server = `${url.hostname}:${port}`
  const query = `?stream=${encodeURIComponent(stream)}&consumer=${encodeURIComponent(consumer)}`
  const shownUser = user !== "" && pass !== "" ? `${encodeURIComponent(user)}@` : ""
  return {
    server,
    ...(user !== "" && pass !== "" ? { user, pass } : {}),
    ...(user !== "" && pass === "" ? { token: user } : {}),
    stream,
    consumer,
    describe: `nats://${shownUser}${server}/${query}`,
  }
}

function required(url: URL, key: string, what: string): string {
  const values = url.searchParams.getAll(key)
  if (values.length === 0 || values[0] === "") throw usage(`the source URL has no ${key}: add ${what} (${example})`)
  if (values.length > 1) throw usage(`the source URL names ${key} ${values.length} times; give it once`)
  const value = values[0] as string
  if (!validName.test(value)) throw usage(`${key} "${value}" is not a JetStream name: no spaces, dots, *, > or slashes`)
  return value
}

function usage(message: string, cause?: unknown): SpoolError {
  return new SpoolError("usage", message, cause === undefined ? undefined : { cause })
}
