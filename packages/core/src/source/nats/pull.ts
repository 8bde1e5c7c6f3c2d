// One pull request at a time, for exactly the messages a batch takes. A fetch is closed as soon
// as the connection drops: its request died with the socket, and a fetch left open would send a
// second request on reconnect while the first may still be alive on the server, so more than
// asked could arrive, and what arrives after the fetch ends is lost until ack_wait brings it back.
import type { Consumer, JsMsg } from "@nats-io/jetstream"
import type { Link } from "./link.ts"

/** A JetStream pull request expires after 1 s at the soonest (the client refuses less). */
export const minExpiresMs = 1000
// The server ends a request at its expiry; this backstop only covers an end that never came.
const backstopMs = 2000

/** What one pull request brought, and whether it ended early (a dropped connection, an abort, an error). */
export interface Pulled {
  readonly messages: JsMsg[]
  readonly isInterrupted: boolean
  readonly error?: unknown
}

/**
 * Sends one pull request for up to `count` messages that the server ends at `expiresMs`, and
 * collects what it brings; anything beyond `count` is handed straight back (nak), so that no
 * more than `count` are ever in hand.
 */
export async function pullOnce(
  consumer: Consumer,
  link: Link,
  count: number,
  expiresMs: number,
  signal?: AbortSignal,
): Promise<Pulled> {
  const expires = Math.max(minExpiresMs, Math.ceil(expiresMs))
  const messages: JsMsg[] = []
  let isInterrupted = false
  let iterator: Awaited<ReturnType<Consumer["fetch"]>>
  try {
    iterator = await consumer.fetch({ max_messages: count, expires })
  } catch (error) {
    return { messages, isInterrupted: true, error }
  }
  const interrupt = () => {
    isInterrupted = true
    // Not awaited: close() resolves only once the iteration below has seen the end.
    void iterator.close()
  }
  const removeListener = link.onDisconnect(interrupt)
  signal?.addEventListener("abort", interrupt, { once: true })
  const backstop = setTimeout(interrupt, expires + backstopMs)
  if (signal?.aborted) interrupt()
  try {
    for await (const message of iterator) {
      if (messages.length < count) messages.push(message)
      else message.nak()
    }
    return { messages, isInterrupted }
  } catch (error) {
    return { messages, isInterrupted: true, error }
  } finally {
    removeListener()
    clearTimeout(backstop)
    signal?.removeEventListener("abort", interrupt)
  }
}
