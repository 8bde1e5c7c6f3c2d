// Which broker failures are worth trying again, and what to tell the operator about the others.
import type { SpoolErrorCode } from "../../errors.ts"
import { type AmqpUrl, vhostOf } from "./url.ts"

// amqplib puts the AMQP reply code on channel and connection errors; the handshake's refusals
// arrive as text only (a refused login, a vhost that cannot be opened).
const refusedLogin = /ACCESS[-_]REFUSED/
const refusedVhost = /Expected ConnectionOpenOk|NOT[-_]ALLOWED/

function replyCode(error: unknown): number | undefined {
  const code = typeof error === "object" && error !== null && "code" in error ? error.code : undefined
  return typeof code === "number" ? code : undefined
}

/** The failure's own words, for a log line. */
export function describeFailure(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

/**
 * Whether the broker would refuse the same request again: a queue that does not exist (404),
 * access refused (403), a queue locked by another connection (405), a login or vhost refused
 * during the handshake. Anything else (a connection refused or reset, the broker closing the
 * connection, an internal error) may pass and is tried again.
 */
export function isPermanent(error: unknown): boolean {
  const code = replyCode(error)
  if (code === 403 || code === 404 || code === 405 || code === 530) return true
  const text = describeFailure(error)
  return refusedLogin.test(text) || refusedVhost.test(text)
}

/** The error code and the operator's message for a permanent failure (see isPermanent). */
export function describeRefusal(error: unknown, url: AmqpUrl): [SpoolErrorCode, string] {
  const queue = JSON.stringify(url.queue)
  const vhost = JSON.stringify(vhostOf(url))
  const because = describeFailure(error)
  switch (replyCode(error)) {
    case 404:
      return [
        "not-a-queue",
        `${url.describe}: there is no queue ${queue} in vhost ${vhost}; declare it ` +
          `(rabbitmqadmin declare queue name=${url.queue} durable=true) or correct ?queue= in the URL`,
      ]
    case 405:
      return ["usage", `${url.describe}: queue ${queue} is in exclusive use by another connection (${because})`]
  }
  if (refusedVhost.test(because))
    return [
      "usage",
      `${url.describe}: RabbitMQ would not open vhost ${vhost} (it does not exist, or the user may not use it); ` +
        "the vhost is the URL's path: amqp://host/ is the default vhost /, amqp://host/prod is prod",
    ]
  return [
    "usage",
    `${url.describe}: RabbitMQ refused access (${because}); check the user and password in the URL ` +
      `and the user's permissions on vhost ${vhost}`,
  ]
}
