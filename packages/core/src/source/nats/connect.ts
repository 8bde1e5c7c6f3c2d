// The first connection to a NATS server, tried again as the other brokers' are: a server that is
// down, restarting or not yet up when the consumer starts is waited for with backoff, up to the
// source's outage allowance (60 s by default), and the wait ends at once when the run is stopped.
// A server that refuses the login, or is not a NATS server at all, would answer the same way
// every time: that fails at the first attempt.
import {
  AuthorizationError,
  connect,
  type NatsConnection,
  UserAuthenticationExpiredError,
} from "@nats-io/transport-node"
import { SpoolError } from "../../errors.ts"
import type { Log } from "../../log.ts"
import { Backoff, sleep } from "../backoff.ts"
import { checkNatsGreeting } from "./greeting.ts"
import type { JetStreamUrl } from "./url.ts"

/** Where, and as whom, a NATS connection logs in. */
export interface NatsServer {
  /** `host:port`. */
  readonly server: string
  readonly user?: string | undefined
  readonly pass?: string | undefined
  readonly token?: string | undefined
}

/** The options of every spool connection to NATS: the source's, and its keeper's own. */
export function connectionOptions(to: NatsServer, name: string, timeoutMs: number): Parameters<typeof connect>[0] {
  return {
    servers: to.server,
    name,
    ...(to.user !== undefined ? { user: to.user } : {}),
    ...(to.pass !== undefined ? { pass: to.pass } : {}),
    ...(to.token !== undefined ? { token: to.token } : {}),
    timeout: timeoutMs,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 1000,
    // A connection that died without a FIN is noticed within two missed pings.
    pingInterval: 10_000,
  }
}

/** How the first connection is made and how long it is waited for. */
export interface FirstConnection {
  readonly name: string
  readonly timeoutMs: number
  /** How long the server may stay out of reach before the open fails. */
  readonly outageMs: number
  readonly log: Log
  /** Ends the wait: the open then rejects with the signal's reason. */
  readonly signal?: AbortSignal
}

/** Connects to the server of `url`, waiting for it as `how` allows; see the top of the file. */
export async function connectFirst(url: JetStreamUrl, how: FirstConnection): Promise<NatsConnection> {
  const backoff = new Backoff({ giveUpAfterMs: how.outageMs })
  for (let attempt = 1; ; attempt++) {
    how.signal?.throwIfAborted()
    try {
      // Not NATS at all (a usage error) or silent (io) is thrown as the SpoolError it is.
      await checkNatsGreeting(url.server, url.describe, how.timeoutMs)
      return await connect(connectionOptions(url, how.name, how.timeoutMs))
    } catch (error) {
      if (error instanceof SpoolError) throw error
      const because = error instanceof Error ? error.message : String(error)
      if (error instanceof AuthorizationError || error instanceof UserAuthenticationExpiredError)
        throw new SpoolError(
          "usage",
          `NATS at ${url.describe} refused the login (${because}); check the user and password or token in the URL`,
          { cause: error },
        )
      const now = Date.now()
      const delay = backoff.next(now)
      if (delay === undefined)
        throw new SpoolError(
          "io",
          `NATS at ${url.describe} could not be reached for ${Math.round(backoff.elapsed(now) / 1000)} s ` +
            `(${because}); check that it runs and that the URL's host and port are right`,
          { cause: error },
        )
      how.log.warn("source-retry", { source: url.describe, attempt, delay_ms: Math.round(delay), error: because })
      await sleep(delay, how.signal)
    }
  }
}
