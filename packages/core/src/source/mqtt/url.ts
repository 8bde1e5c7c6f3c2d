// The `--source` URL of an MQTT subscription, e.g.
// `mqtt://127.0.0.1:1883/?topic=orders/#&client=spool-1`.
//
// `mqtt:` or `mqtts:` (TLS), user and password (percent-encoded, both optional), host and port
// (1883, or 8883 for mqtts). The query is read from the raw text, not as a browser would: a topic
// filter's `#` is part of the query (not a fragment) and its `+` is a plus (not a space), so
// filters are written as they are (`%23` and `%2B` work too).
//
// Query parameters:
// - `topic` (required, repeatable): a topic filter subscribed at QoS 1. A `$share/GROUP/FILTER`
//   filter shares its messages among the consumers of that group.
// - `client` (required): the client id, the name of the broker's session. It must stay the same
//   from run to run: the session holds what was delivered and not acknowledged, and only a
//   connection with the same id gets it again.
// - `sessionExpiry` (seconds; default 604800, a week): how long the broker keeps the session, and
//   the messages its subscriptions take in, while no consumer is connected.
// - `clean` and `qos` are refused unless they say what spool does anyway (`clean=false`,
//   `qos=1`): a clean session or QoS 0 loses what a stopped consumer had not acknowledged.
// Any other parameter is refused, so that a misspelt one is not silently ignored.
import { SpoolError } from "../../errors.ts"

/** A parsed MQTT source URL. */
export interface MqttUrl {
  /** What MQTT.js connects to: scheme, host and port, without the credentials or the query. */
  readonly broker: string
  readonly username?: string
  readonly password?: string
  /** The topic filters subscribed, each at QoS 1. */
  readonly topics: readonly string[]
  /** The client id: the broker's session is named by it. */
  readonly clientId: string
  /** How long the broker keeps the session while no consumer is connected, in seconds. */
  readonly sessionExpirySeconds: number
  /** The URL without its password, for logs, errors and a delivery's origin. */
  readonly describe: string
}

/** A week: a consumer stopped over a long weekend still finds its session and what it took in. */
export const defaultSessionExpirySeconds = 604_800

const known = ["topic", "client", "sessionExpiry", "clean", "qos"]
const example = "mqtt://127.0.0.1:1883/?topic=orders/%23&client=spool-1"

/** Reads an `mqtt://` or `mqtts://` source URL; a SpoolError("usage") says what to write instead. */
export function parseMqttUrl(text: string): MqttUrl {
  const at = text.indexOf("?")
  const head = at < 0 ? text : text.slice(0, at)
  const query = at < 0 ? "" : text.slice(at + 1)
  let url: URL
  try {
    url = new URL(head)
  } catch {
    throw new SpoolError("usage", `${describeUnparsed(text)} is not a URL; write it as ${example}`)
  }
  const describe = describeUrl(url, query)
  const fail = (what: string) => new SpoolError("usage", `${describe} ${what}`)
  if (url.protocol !== "mqtt:" && url.protocol !== "mqtts:")
    throw fail("is not an MQTT URL: it must start mqtt:// or mqtts://")
  if (url.hostname === "") throw fail(`names no host; write it as ${example}`)
  if (url.pathname !== "" && url.pathname !== "/")
    throw fail(`has a path (${url.pathname}); MQTT has none: name the topic with ?topic=FILTER`)
  const params = readQuery(query, fail)
  const unknown = [...params.keys()].filter((key) => !known.includes(key))
  if (unknown.length > 0)
    throw fail(
      `has a parameter an MQTT source does not know (${unknown.join(", ")}); it takes topic and client (required), sessionExpiry`,
    )
  const one = (key: string): string | undefined => {
    const values = params.get(key) ?? []
    if (values.length > 1) throw fail(`gives ${key} more than once`)
    return values[0]
  }
  const topics = params.get("topic") ?? []
  if (topics.length === 0) throw fail(`names no topic: add ?topic=FILTER (e.g. ${example}); write # as %23 or as it is`)
  for (const topic of topics) {
    const problem = filterProblem(topic)
    // The broker would refuse the subscription, which the client reports like a lost connection.
    if (problem !== undefined)
      throw fail(`gives the topic ${JSON.stringify(topic)}, which is no topic filter: ${problem}`)
  }
  const clientId = one("client")
  if (clientId === undefined || clientId === "")
    throw fail(
      "names no client id: add &client=NAME, the same on every run; the broker keeps the session " +
        "(what was delivered and not acknowledged) under that name, and a new name would start an empty one",
    )
  const clean = one("clean")
  if (clean !== undefined && clean !== "false")
    throw fail(
      `asks for clean=${clean}: a clean session forgets what a stopped consumer had not acknowledged ` +
        "(at most once); spool always resumes its session, so leave clean out",
    )
  const qos = one("qos")
  if (qos !== undefined && qos !== "1")
    throw fail(
      `asks for qos=${qos}: spool subscribes at QoS 1 and acknowledges each message after its outcome is ` +
        "committed; QoS 0 is never acknowledged, so a message in hand at a crash is lost (at most once); leave qos out",
    )
  const expiry = one("sessionExpiry")
  const sessionExpirySeconds = expiry === undefined ? defaultSessionExpirySeconds : Number(expiry)
  if (!/^\d+$/.test(expiry ?? "0") || !Number.isSafeInteger(sessionExpirySeconds) || sessionExpirySeconds > 0xffff_ffff)
    throw fail(
      `has sessionExpiry=${expiry}: write it in whole seconds, e.g. sessionExpiry=${defaultSessionExpirySeconds}`,
    )
  if (sessionExpirySeconds === 0)
    throw fail(
      "has sessionExpiry=0: the session would end with each connection, as a clean one, and what a stopped " +
        "consumer had not acknowledged would be lost; give it seconds enough to outlast a restart",
    )
  const username = url.username === "" ? undefined : decodeURIComponent(url.username)
  const password = url.password === "" ? undefined : decodeURIComponent(url.password)
  return {
    broker: `${url.protocol}//${url.host}`,
    ...(username !== undefined ? { username } : {}),
    ...(password !== undefined ? { password } : {}),
    topics,
    clientId,
    sessionExpirySeconds,
    describe,
  }
}

function readQuery(query: string, fail: (what: string) => SpoolError): Map<string, string[]> {
  const params = new Map<string, string[]>()
  for (const pair of query.split("&")) {
    if (pair === "") continue
    const eq = pair.indexOf("=")
    const [rawKey, rawValue] = eq < 0 ? [pair, ""] : [pair.slice(0, eq), pair.slice(eq + 1)]
    let key: string
    let value: string
    try {
      key = decodeURIComponent(rawKey)
      value = decodeURIComponent(rawValue)
    } catch {
      throw fail(`has a parameter that is not valid percent-encoding (${pair})`)
    }
    params.set(key, [...(params.get(key) ?? []), value])
  }
  return params
}

function describeUrl(url: URL, query: string): string {
  const shown = new URL(url.href)
  shown.password = ""
  const base = shown.href.replace(/\/$/, "")
  return `${base}/${query === "" ? "" : `?${query}`}`
}

// An unparsable URL may still hold a password: hide whatever sits between "//user:" and "@".
function describeUnparsed(text: string): string {
  return JSON.stringify(text.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*):[^@/]*@/i, "$1@"))
}

/** Why `filter` is no MQTT topic filter (MQTT 5.0, 4.7.1 and 4.8.2), or undefined when it is one. */
function filterProblem(filter: string): string | undefined {
  let f = filter
  if (f.startsWith("$share/")) {
    const [, group = "", ...rest] = f.split("/")
    if (group === "" || /[+#]/.test(group)) return "a $share/GROUP/FILTER filter names its group, without + or #"
    f = rest.join("/")
  }
  if (f === "") return "it is empty; write one, e.g. orders/#"
  if (f.includes("\0")) return "it holds U+0000"
  const levels = f.split("/")
  for (const [i, level] of levels.entries()) {
    if (level.includes("#") && (level !== "#" || i !== levels.length - 1))
      return "# stands alone as the last level (orders/#)"
    if (level.includes("+") && level !== "+") return "+ stands alone as a level (orders/+/lines)"
  }
  return undefined
}
