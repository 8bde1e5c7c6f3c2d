// A Redis consumer group's backlog, from XINFO GROUPS: lag (entries in the stream not yet
// delivered to the group) and pending (delivered, not yet acknowledged). Redis leaves lag out
// (nil) when it cannot count it, after entries were deleted or trimmed past the group's place.
import Redis from "ioredis"
import type { Backlog } from "../backlog.ts"
import { parseRedisUrl } from "./url.ts"

/** The group's lag and pending entries. */
export async function readRedisBacklog(text: string, timeoutMs: number): Promise<Backlog> {
  const url = parseRedisUrl(text)
  const client = new Redis({
    host: url.host,
    port: url.port,
    db: url.db,
    ...(url.username !== undefined ? { username: url.username } : {}),
    ...(url.password !== undefined ? { password: url.password } : {}),
    ...(url.isTls ? { tls: { servername: url.host } } : {}),
    protocol: 2,
    lazyConnect: true,
    connectionName: "spool-serve",
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  })
  // ioredis emits the connection's failure as an 'error' event and rejects with "Connection is
  // closed." only: the event's words are the reason to show.
  let failure: unknown
  client.on("error", (error: unknown) => {
    failure ??= error
  })
  try {
    await client.connect().catch((error: unknown) => {
      throw failure ?? error
    })
    const groups = (await client.call("XINFO", "GROUPS", url.stream).catch((error: unknown) => {
      throw /no such key/i.test(String(error)) ? new Error(`stream ${url.stream} does not exist`) : error
    })) as unknown[][]
    const group = groups.map(fields).find((g) => g.get("name") === url.group)
    if (group === undefined) throw new Error(`stream ${url.stream} has no group ${url.group}`)
    const lag = group.get("lag")
    const pending = Number(group.get("pending"))
    const waiting = lag === null || lag === undefined ? undefined : Number(lag)
    if (waiting === undefined)
      return {
        state: "not-available",
        reason: `Redis cannot count group ${url.group}'s lag (entries were deleted or trimmed); ${pending} pending`,
      }
    return {
      state: "read",
      waiting,
      unacked: pending,
      what: `stream ${url.stream}, group ${url.group}: lag ${waiting}, pending ${pending}`,
    }
  } finally {
    client.disconnect()
  }
}

function fields(flat: readonly unknown[]): Map<string, unknown> {
  const out = new Map<string, unknown>()
  for (let i = 0; i + 1 < flat.length; i += 2) out.set(String(flat[i]), flat[i + 1])
  return out
}
