// How an MQTT PUBLISH becomes a Delivery, and how an Origin becomes a publish again.
//
// MQTT gives a message no identity that outlives a connection: a packet id names a message in
// flight on one session and is reused as soon as it is acknowledged. A delivery's id is therefore
// made from its body (`sha256:HEX`, not stable), and a redelivery is recognised only when the
// broker sets DUP (it resends a PUBLISH it had sent before without a PUBACK). The same bytes
// published again by a producer arrive without DUP: a new delivery, which the ledger counts as a
// duplicate. A replay carries the `spool-replay-of` user property and takes a stable id from it.
import { createHash } from "node:crypto"
import type { IClientPublishOptions, IPublishPacket } from "mqtt"
import { type Delivery, type Origin, replayHeader } from "../port.ts"

/** The Delivery for a PUBLISH the broker sent on a subscription of `source`. */
export function toDelivery(packet: IPublishPacket, source: string): Delivery {
  const payload = packet.payload
  const body = typeof payload === "string" ? new TextEncoder().encode(payload) : new Uint8Array(payload)
  const headers = textProperties(packet.properties?.userProperties)
  const base = `sha256:${createHash("sha256").update(body).digest("hex")}`
  const replayOf = headers[replayHeader]
  return {
    id: replayOf === undefined ? base : `${base}~replay-${replayOf}`,
    stableId: replayOf !== undefined,
    body,
    // MQTT counts no deliveries: poison is found by the crash rule, as on a classic AMQP queue.
    deliveryCount: undefined,
    redelivered: packet.dup,
    origin: {
      source,
      address: packet.topic,
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
    },
  }
}

/** The publish options of a replay of `origin`: QoS 1, its user properties back, never retained. */
export function publishOptions(origin: Origin): IClientPublishOptions {
  const userProperties = { ...(origin.headers ?? {}) }
  return {
    qos: 1,
    retain: false,
    ...(Object.keys(userProperties).length > 0 ? { properties: { userProperties } } : {}),
  }
}

// A user property may repeat (MQTT.js gives an array): only a single text value is kept, so a
// replay publishes back exactly what it read.
function textProperties(properties: Record<string, string | string[]> | undefined): Record<string, string> {
  const text: Record<string, string> = {}
  for (const [key, value] of Object.entries(properties ?? {})) if (typeof value === "string") text[key] = value
  return text
}
