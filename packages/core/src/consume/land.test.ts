import { expect, test } from "bun:test"
import type { Delivery } from "../source/port.ts"
import { landedName } from "./land.ts"

const delivery = (source: string, address: string, id: string): Delivery => ({
  id,
  stableId: true,
  body: new Uint8Array(),
  deliveryCount: 1,
  redelivered: false,
  origin: { source, address },
})

test.each([
  ["nats://127.0.0.1:4222/?stream=ORDERS&consumer=spool", "orders.new", "ORDERS:17", "nats-ORDERS-17.json"],
  ["amqp://guest@127.0.0.1:5672/?queue=orders", "orders", "p-1", "amqp-orders-p-1.json"],
  ["amqps://h/?queue=orders", "orders", "p-1", "amqp-orders-p-1.json"],
  [
    "redis://127.0.0.1:6379/?stream=orders&group=spool",
    "orders",
    "1700000000000-0",
    "redis-orders-1700000000000-0.json",
  ],
  ["rediss://h/?stream=a/b&group=g", "a/b", "replay-c1", "redis-a%2Fb-replay-c1.json"],
])(
  "a delivery from %s lands under its scheme, its address where ids are scoped by it, and its id",
  (source, address, id, name) => {
    expect(landedName(delivery(source, address, id))).toBe(name)
  },
)
