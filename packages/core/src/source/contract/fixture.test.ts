// What the source contract's cases are given: a queue (stream, topic) of one transport opened
// fresh on the machine's server, what that transport supports, and helpers to receive with a
// bound. Registers no test of its own.
import { expect } from "bun:test"
import type { ToolTest } from "@spool/test-support"
import type { Delivery, SourcePort } from "../port.ts"

/** What one transport has that another lacks; a case for one of them is registered only where it holds. */
export interface Features {
  /** A delivery's id survives its redelivery (a JetStream sequence, an AMQP message-id, a Redis entry id). */
  readonly stableId: boolean
  /** Each delivery says how many times the message was delivered (`deliveryCount`). */
  readonly countsDeliveries: boolean
  /** `release` with `delayMs` holds the redelivery back that long (JetStream's delayed nak, a Redis entry's idle time). */
  readonly delayedRelease: boolean
  /** A delivery in hand goes to another consumer after `keepAliveWithinMs` unless kept alive. */
  readonly needsKeepAlive: boolean
  /** The source names a keeper module for the engine's keeper thread. */
  readonly hasKeeper: boolean
}

/** A queue of the case's own on the transport's server; disposing it closes every source opened on it and removes it. */
export interface SourceUnderTest extends AsyncDisposable {
  /**
   * The source port on this queue. The same consumer each time it is opened again (its
   * deliveries in hand come back to it), or, as `second`, another consumer of the same queue.
   */
  open(consumer?: "first" | "second"): Promise<SourcePort>
  /** Publishes each body, byte for byte, in order, and resolves once the server stored them. */
  publish(...bodies: Uint8Array[]): Promise<void>
}

/** One transport the contract runs on. */
export interface SourceTransport {
  readonly name: string
  readonly features: Features
  /** `it` when its server answers; where none does, a test that is skipped with the reason (failed under CI). */
  readonly it: ToolTest
  open(): Promise<SourceUnderTest>
}

/** The transport's `it` where it has `feature`; elsewhere the case is not registered at all. */
export function itWith(t: SourceTransport, feature: keyof Features, has = true): ToolTest {
  return t.features[feature] === has ? t.it : () => {}
}

const encoder = new TextEncoder()
export const bytes = (text: string): Uint8Array => encoder.encode(text)
export const text = (d: Delivery): string => new TextDecoder().decode(d.body)

/** How long a receive must come back empty to show nothing is coming: past any window after which a held delivery returns. */
export function quietMs(source: SourcePort): number {
  return (source.keepAliveWithinMs ?? 0) + 1000
}

/** Receives batches of at most `max` until `count` deliveries came or `ms` passed, checking each batch's size. */
export async function receiveAll(source: SourcePort, count: number, max = count, ms = 15_000): Promise<Delivery[]> {
  const got: Delivery[] = []
  const end = Date.now() + ms
  while (got.length < count && Date.now() < end) {
    const batch = await source.receive(Math.min(max, count - got.length), 1000)
    expect(batch.length).toBeLessThanOrEqual(max)
    got.push(...batch)
  }
  return got
}

/** Receives and acks batch after batch until a receive comes back empty after `ms`; what came. */
export async function drain(source: SourcePort, ms: number): Promise<Delivery[]> {
  const got: Delivery[] = []
  for (;;) {
    const batch = await source.receive(10, ms)
    if (batch.length === 0) return got
    // Acked as it comes: one left in hand past a window would come again and the drain never end.
    await source.ack(batch)
    got.push(...batch)
  }
}

/** Sorted for comparison: brokers that publish in parallel (MQTT) need not keep the order. */
export const sorted = (values: readonly string[]): string[] => [...values].sort()
