// The Redis Streams keeper (see KeeperSpec in ../port.ts): run in a worker thread with a
// connection of its own, it restarts the idle time of the entries in hand (lease.ts's
// refreshLease: XCLAIM to the same consumer, JUSTID), so that no other consumer's XAUTOCLAIM takes
// them while a synchronous handler holds the main thread. Redis takes the claim from any
// connection: the keeper needs nothing of the source's, only the group's coordinates.
import Redis from "ioredis"
import type { Keeper } from "../port.ts"
import { type Holder, refreshLease } from "./lease.ts"

/** How the keeper connects, and whose entries it keeps: the source's server, credentials and holder. */
export interface RedisKeeperOptions {
  readonly host: string
  readonly port: number
  readonly db: number
  readonly username?: string
  readonly password?: string
  readonly isTls: boolean
  /** The connection's name in CLIENT LIST. */
  readonly name: string
  readonly holder: Holder
  readonly connectTimeoutMs: number
}

/** Opens the keeper's own connection; fails when Redis refuses it or cannot be reached. */
export async function openKeeper(options: unknown): Promise<Keeper> {
  const o = options as RedisKeeperOptions
  const client = new Redis({
    host: o.host,
    port: o.port,
    db: o.db,
    ...(o.username !== undefined ? { username: o.username } : {}),
    ...(o.password !== undefined ? { password: o.password } : {}),
    ...(o.isTls ? { tls: { servername: o.host } } : {}),
    protocol: 2,
    lazyConnect: true,
    connectionName: o.name,
    connectTimeout: o.connectTimeoutMs,
    // A round sent while the connection is down waits for it (XCLAIM is idempotent); the worker
    // sends no second round before the first settles, and reports one that fails.
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  })
  client.on("error", () => {})
  try {
    await client.connect()
  } catch (error) {
    client.disconnect()
    throw error
  }
  return {
    keep: (tokens) => refreshLease(client, o.holder, tokens),
    async close() {
      await client.quit().catch(() => client.disconnect())
    },
  }
}
