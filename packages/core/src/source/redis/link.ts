// One connection to Redis, reconnected with backoff (ReconnectPolicy) after a loss, and given up
// once an outage lasts longer than the policy allows. A source holds several: a blocking
// XREADGROUP holds its connection for the whole wait, so acks and lease refreshes need their own.
import Redis from "ioredis"
import { SpoolError } from "../../errors.ts"
import type { Log } from "../../log.ts"
import { Backoff, type ReconnectPolicy } from "../backoff.ts"
import type { RedisUrl } from "./url.ts"

/** How a link connects, and where it reports losses. */
export interface LinkOptions {
  readonly url: RedisUrl
  /** The connection's name in CLIENT LIST (no spaces). */
  readonly name: string
  readonly log: Log
  readonly reconnect?: ReconnectPolicy
  readonly connectTimeoutMs?: number
  /**
   * Whether a command sent while the connection is down waits for it to come back (and one in
   * flight when it drops is sent again): right for idempotent commands (XACK, XCLAIM), wrong for
   * a blocking read, which the receive loop sends again itself.
   */
  readonly isQueueing: boolean
}

// Refusals the server would repeat on every connection: a wrong login, a database that does not exist.
const refusedLogin = /WRONGPASS|NOAUTH|NOPERM|AUTH.*(called without|invalid)|invalid (username|password)/i
const refusedDb = /DB index is out of range|invalid DB index/i

/** A Redis client with its reconnection state. */
export class Link {
  readonly client: Redis
  readonly #url: RedisUrl
  readonly #log: Log
  readonly #backoff: Backoff
  #lastError: unknown
  #connections = 0

  constructor(options: LinkOptions) {
    const { url } = options
    this.#url = url
    this.#log = options.log
    this.#backoff = new Backoff(options.reconnect)
    this.client = new Redis({
      host: url.host,
      port: url.port,
      db: url.db,
      ...(url.username !== undefined ? { username: url.username } : {}),
      ...(url.password !== undefined ? { password: url.password } : {}),
      ...(url.isTls ? { tls: { servername: url.host } } : {}),
      // RESP2 replies: the shapes every Redis version answers streams commands with.
      protocol: 2,
      lazyConnect: true,
      connectionName: options.name,
      connectTimeout: options.connectTimeoutMs ?? 10_000,
      enableOfflineQueue: options.isQueueing,
      autoResendUnfulfilledCommands: options.isQueueing,
      maxRetriesPerRequest: options.isQueueing ? null : 0,
      retryStrategy: () => this.#retryDelay(),
    })
    this.client.on("error", (error: unknown) => {
      this.#lastError = error
    })
    this.client.on("ready", () => {
      this.#connections++
      this.#backoff.reset()
    })
  }

  /** How many times the connection has become ready: a change means the one before was lost. */
  get connections(): number {
    return this.#connections
  }

  /** Whether the connection is up and ready for commands. */
  get isReady(): boolean {
    return this.client.status === "ready"
  }

  /** Whether the client gave up reconnecting (or was closed): its commands fail at once. */
  get isEnded(): boolean {
    return this.client.status === "end"
  }

  /**
   * Resolves true once the connection is ready, connecting (again) first when it is not; false
   * when `signal` aborts first. Throws a SpoolError when the server refuses the login or the
   * database, or stays out of reach longer than the reconnect policy allows.
   */
  async ready(signal?: AbortSignal): Promise<boolean> {
    const client = this.client
    if (client.status === "ready") return true
    if (signal?.aborted) return false
    if (client.status === "wait" || client.status === "end") {
      this.#backoff.reset()
      client.connect().catch(() => {})
    }
    const outcome = await new Promise<"ready" | "end" | "aborted">((resolve) => {
      const done = (how: "ready" | "end" | "aborted") => {
        client.off("ready", onReady)
        client.off("end", onEnd)
        client.off("error", onError)
        signal?.removeEventListener("abort", onAbort)
        resolve(how)
      }
      const onReady = () => done("ready")
      const onEnd = () => done("end")
      const onAbort = () => done("aborted")
      // A refused login fails the same way on every attempt: stop at the first.
      const onError = (error: unknown) => {
        if (isRefusal(error)) {
          client.disconnect()
          done("end")
        }
      }
      client.on("ready", onReady)
      client.on("end", onEnd)
      client.on("error", onError)
      signal?.addEventListener("abort", onAbort, { once: true })
    })
    if (outcome === "ready") return true
    if (outcome === "aborted") return false
    throw this.failure()
  }

  /** The error to report for a connection that is gone: a refusal as such, else the outage. */
  failure(): SpoolError {
    const because = messageOf(this.#lastError ?? "the connection closed")
    if (refusedLogin.test(because))
      return new SpoolError(
        "usage",
        `${this.#url.describe}: Redis refused the login (${because}); check the user and password in the URL`,
        { cause: this.#lastError },
      )
    if (refusedDb.test(because))
      return new SpoolError(
        "usage",
        `${this.#url.describe}: Redis has no database ${this.#url.db} (${because}); the URL's path is the database number`,
        { cause: this.#lastError },
      )
    const seconds = Math.round(this.#backoff.elapsed(Date.now()) / 1000)
    return new SpoolError(
      "io",
      `${this.#url.describe}: Redis could not be reached${seconds > 0 ? ` for ${seconds} s` : ""} (${because}); ` +
        "check that it runs and that the URL's host and port are right",
      { cause: this.#lastError },
    )
  }

  /** Ends the connection: QUIT (the replies to what was sent before come first), or at once when it is down. */
  async close(timeoutMs = 2000): Promise<void> {
    const client = this.client
    if (client.status === "end") return
    if (client.status !== "ready") return client.disconnect()
    let timer: ReturnType<typeof setTimeout> | undefined
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs)
    })
    await Promise.race([client.quit().catch(() => {}), timeout])
    clearTimeout(timer)
    client.disconnect()
  }

  #retryDelay(): number | null {
    if (isRefusal(this.#lastError)) return null
    const delay = this.#backoff.next(Date.now())
    if (delay === undefined) return null
    this.#log.warn("source-retry", {
      source: this.#url.describe,
      delay_ms: Math.round(delay),
      error: messageOf(this.#lastError ?? "the connection closed"),
    })
    return delay
  }
}

function isRefusal(error: unknown): boolean {
  const text = messageOf(error)
  return refusedLogin.test(text) || refusedDb.test(text)
}

/** An error's own words, for a log line or a message. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
