// Test support for Redis Streams sources: a stream of the test's own on the machine's Redis, with
// its consumer group `spool` created at 0 and a short lease, so that a killed consumer's entries
// are taken over within a test; deleted, group and all, when disposed.
import { randomUUID } from "node:crypto"
import Redis from "ioredis"

/** A stream and its group, deleted when disposed. */
export interface TempRedisStream extends AsyncDisposable {
  readonly stream: string
  readonly group: string
  /** The source URL of the group, with the lease it was made with. */
  readonly url: string
  /** A client of the test's own, for what the helpers below do not cover. */
  readonly client: Redis
  /** Adds each body as an entry's `body` field, in order, and returns their entry ids. */
  publish(...bodies: (string | Uint8Array)[]): Promise<string[]>
  /** Entries the group has not had acknowledged: pending with a consumer, or not yet delivered. */
  unacked(): Promise<number>
  /** The group's pending entries: id, consumer, idle ms, delivery count. */
  pending(): Promise<{ id: string; consumer: string; idleMs: number; count: number }[]>
}

export async function tempRedisStream(leaseMs = 1000): Promise<TempRedisStream> {
  const client = new Redis({ host: "127.0.0.1", port: 6379, protocol: 2 })
  const stream = `spool-test-${randomUUID()}`
  const group = "spool"
  await client.call("XGROUP", "CREATE", stream, group, "0", "MKSTREAM")
  const pending = async () => {
    const rows = (await client.call("XPENDING", stream, group, "-", "+", "100000")) as [
      string,
      string,
      number,
      number,
    ][]
    return rows.map(([id, consumer, idleMs, count]) => ({ id, consumer, idleMs, count }))
  }
  return {
    stream,
    group,
    url: `redis://127.0.0.1:6379/?stream=${encodeURIComponent(stream)}&group=${group}&lease=${leaseMs}`,
    client,
    async publish(...bodies) {
      const pipeline = client.pipeline()
      for (const b of bodies) pipeline.xadd(stream, "*", "body", typeof b === "string" ? b : Buffer.from(b))
      const results = await pipeline.exec()
      const failed = results?.find(([error]) => error !== null)
      if (failed) throw failed[0]
      return (results ?? []).map(([, id]) => String(id))
    },
    async unacked() {
      const groups = (await client.call("XINFO", "GROUPS", stream)) as unknown[][]
      const info = groups.map((g) => Object.fromEntries(pairs(g))).find((g) => g.name === group)
      const last = String(info?.["last-delivered-id"] ?? "0-0")
      const undelivered = (await client.call("XRANGE", stream, `(${last}`, "+")) as unknown[]
      return Number(info?.pending ?? 0) + undelivered.length
    },
    pending,
    async [Symbol.asyncDispose]() {
      await client.del(stream)
      await client.quit()
    },
  }
}

function pairs(flat: readonly unknown[]): [string, unknown][] {
  const out: [string, unknown][] = []
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([String(flat[i]), flat[i + 1]])
  return out
}
