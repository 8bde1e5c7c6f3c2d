// The Redis Streams source's URL:
// redis[s]://[[user]:password@]host[:port][/db]?stream=S&group=G[&consumer=NAME][&lease=30s]
// - `stream` (required): the stream key to read and to publish replays to.
// - `group` (required): the consumer group read through, created at 0 when missing.
// - `consumer`: this consumer's name in the group; default one per host and queue root (source.ts).
// - `lease`: how long an entry may sit idle in a consumer's pending list before another
//   consumer takes it over (XAUTOCLAIM's min-idle-time); `500ms`, `30s`, `2m` or milliseconds.
// Any other parameter is refused, so that a misspelt one is not silently ignored.
import { SpoolError } from "../../errors.ts"

/** A parsed Redis Streams source URL. */
export interface RedisUrl {
  readonly host: string
  readonly port: number
  readonly db: number
  readonly username?: string
  readonly password?: string
  readonly isTls: boolean
  readonly stream: string
  readonly group: string
  /** The consumer name the URL gives, if any. */
  readonly consumer?: string
  readonly leaseMs: number
  /** The URL without its password, lease or consumer, for logs, errors and a delivery's origin. */
  readonly describe: string
}

/** The lease when the URL gives none: long enough for a slow batch, short enough to recover a dead consumer soon. */
export const defaultLeaseMs = 30_000

const example = "redis://127.0.0.1:6379/?stream=orders&group=spool"
const parameters = ["stream", "group", "consumer", "lease"]

/** Reads a `redis://` or `rediss://` source URL; a SpoolError("usage") says what to write instead. */
export function parseRedisUrl(text: string): RedisUrl {
  let url: URL
  try {
    url = new URL(text)
  } catch (cause) {
    throw usage(`${describeUnparsed(text)} is not a URL; write it as ${example}`, cause)
  }
  if (url.protocol !== "redis:" && url.protocol !== "rediss:")
    throw usage(`${describeUrl(url)} is not a Redis URL: it must start redis:// or rediss://`)
  if (url.hostname === "") throw usage(`${describeUrl(url)} names no host; write it as ${example}`)
  const unknown = [...new Set(url.searchParams.keys())].filter((key) => !parameters.includes(key))
  if (unknown.length > 0)
    throw usage(
      `${describeUrl(url)} has a parameter a Redis source does not know (${unknown.join(", ")}); ` +
        "it takes stream and group (required), consumer, lease",
    )
  const path = url.pathname.replace(/^\//, "")
  if (!/^\d{0,5}$/.test(path))
    throw usage(`${describeUrl(url)}: the path is the database number (/0, /1, ...), not ${JSON.stringify(path)}`)
  const stream = required(url, "stream", "the stream key to read, e.g. ?stream=orders")
  const group = required(url, "group", "the consumer group to read through, e.g. &group=spool")
  const consumer = optional(url, "consumer")
  const lease = optional(url, "lease")
  const username = decodeURIComponent(url.username)
  const password = decodeURIComponent(url.password)
  const port = url.port === "" ? 6379 : Number(url.port)
  const db = path === "" ? 0 : Number(path)
  const shownUser = username === "" ? "" : `${encodeURIComponent(username)}@`
  const query = `?stream=${encodeURIComponent(stream)}&group=${encodeURIComponent(group)}`
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port,
    db,
    ...(username !== "" ? { username } : {}),
    ...(password !== "" ? { password } : {}),
    isTls: url.protocol === "rediss:",
    stream,
    group,
    ...(consumer !== undefined ? { consumer } : {}),
    leaseMs: lease === undefined ? defaultLeaseMs : leaseOf(url, lease),
    describe: `${url.protocol}//${shownUser}${url.host}/${db === 0 ? "" : db}${query}`,
  }
}

function leaseOf(url: URL, text: string): number {
  const match = /^(\d+)(ms|s|m)?$/.exec(text)
  const unit = { ms: 1, s: 1000, m: 60_000 }[(match?.[2] ?? "ms") as "ms" | "s" | "m"]
  const ms = match === null ? Number.NaN : Number(match[1]) * unit
  if (!Number.isSafeInteger(ms) || ms < 100)
    throw usage(`${describeUrl(url)}: lease=${text} is not a duration of 100ms or more; write e.g. lease=30s`)
  return ms
}

function required(url: URL, key: string, what: string): string {
  const value = optional(url, key)
  if (value === undefined) throw usage(`${describeUrl(url)} has no ${key}: add ${what} (${example})`)
  return value
}

function optional(url: URL, key: string): string | undefined {
  const values = url.searchParams.getAll(key)
  if (values.length > 1) throw usage(`${describeUrl(url)} names ${key} ${values.length} times; give it once`)
  const [value] = values
  if (value === "") throw usage(`${describeUrl(url)} has an empty ${key}; give it a value or leave it out`)
  return value
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

function usage(message: string, cause?: unknown): SpoolError {
  return new SpoolError("usage", message, cause === undefined ? undefined : { cause })
}
