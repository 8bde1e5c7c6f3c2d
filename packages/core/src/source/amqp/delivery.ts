// How an AMQP message becomes a Delivery, and how an Origin becomes a publish again.
import { createHash } from "node:crypto"
import type { Message, Options } from "amqplib"
import { type Delivery, type Origin, replayHeader } from "../port.ts"

// Headers the broker writes while a message waits or moves: they describe this delivery, not
// the message, so a replay must not publish them again. A quorum queue would otherwise count a
// replayed message's deliveries from where the old copy stopped (RabbitMQ sets
// x-delivery-count only once it is above 0, and keeps a published one as it is).
const brokerHeaders = /^x-(delivery-count|acquired-count|death|first-death-.*|last-death-.*|received-from)$/

/** The Delivery for a message the broker handed over from `queue`. */
export function toDelivery(message: Message, queue: string, source: string): Delivery {
  const body = new Uint8Array(message.content.buffer, message.content.byteOffset, message.content.byteLength)
  const property: unknown = message.properties.messageId
  const messageId = typeof property === "string" && property !== "" ? property : undefined
  const headers = textHeaders(message.properties.headers)
  const base = messageId ?? `sha256:${createHash("sha256").update(body).digest("hex")}`
  const replayOf = headers[replayHeader]
  return {
    id: replayOf === undefined ? base : `${base}~replay-${replayOf}`,
    stableId: messageId !== undefined || replayOf !== undefined,
    body,
    deliveryCount: deliveryCount(message.properties.headers),
    redelivered: message.fields.redelivered,
    origin: {
      source,
      address: queue,
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
      ...(messageId === undefined ? {} : { messageId }),
    },
  }
}

/** The publish options that give a replay of `origin` its identity and headers back. */
export function publishOptions(origin: Origin): Options.Publish {
  const headers: Record<string, string> = {}
  for (const [key, value] of Object.entries(origin.headers ?? {})) if (!brokerHeaders.test(key)) headers[key] = value
  const messageId = origin.messageId
  return {
    persistent: true,
    // An unroutable message (no queue of that name) comes back as basic.return before its
    // confirm, instead of being confirmed and dropped.
    mandatory: true,
    headers,
    ...(messageId === undefined ? {} : { messageId }),
  }
}

// A quorum queue counts deliveries in headers; a classic queue keeps no count. From RabbitMQ
// 4.3 on, x-acquired-count counts every time the message was handed to a consumer while
// x-delivery-count counts only failures (basic.reject, a consumer's channel lost); before 4.3
// x-delivery-count counts every return, and x-acquired-count does not exist. The port's count
// is "how many times delivered, this one included", so the first header present wins. Both are
// absent on a quorum queue's first delivery (they are written once above 0): that delivery
// reads as undefined, not 1, because a classic queue's deliveries look the same.
function deliveryCount(headers: Message["properties"]["headers"]): number | undefined {
  for (const key of ["x-acquired-count", "x-delivery-count"]) {
    const value: unknown = headers?.[key]
    const count = typeof value === "bigint" ? Number(value) : value
    if (typeof count === "number" && Number.isSafeInteger(count) && count >= 0) return count + 1
  }
  return undefined
}

// Only string headers are kept: the port's origin is text, and a number or a table turned into
// text would be published back as a string of another type.
function textHeaders(headers: Message["properties"]["headers"]): Record<string, string> {
  const text: Record<string, string> = {}
  for (const [key, value] of Object.entries(headers ?? {}))
    if (typeof value === "string" && !brokerHeaders.test(key)) text[key] = value
  return text
}
