// The contract's settling: what an ack, a release, a close and a crash leave the source to
// deliver again.
import { expect } from "bun:test"
import type { Delivery } from "../port.ts"
import { bytes, itWith, quietMs, receiveAll, type SourceTransport, sorted, text } from "./fixture.test.ts"

export function settling(t: SourceTransport): void {
  /** Holds `again` to being a redelivery of `first`: flagged, same id where stable, counted up where counted. */
  const expectRedelivery = (first: Delivery, again: Delivery) => {
    expect(text(again)).toBe(text(first))
    expect([first.redelivered, again.redelivered]).toEqual([false, true])
    expect([first.stableId, again.stableId]).toEqual([t.features.stableId, t.features.stableId])
    if (t.features.stableId) expect(again.id).toBe(first.id)
    // A quorum queue's first delivery carries no count: it reads as unknown, its next as 2.
    expect(again.deliveryCount).toBe(t.features.countsDeliveries ? (first.deliveryCount ?? 1) + 1 : undefined)
  }

  t.it("never delivers an acked delivery again, not even to the source opened again", async () => {
    await using q = await t.open()
    await q.publish(bytes("acked-0"), bytes("acked-1"))
    const first = await q.open()
    const got = await receiveAll(first, 2)
    expect(sorted(got.map(text))).toEqual(["acked-0", "acked-1"])
    await first.ack(got)
    await first.close()
    const again = await q.open()
    expect(await again.receive(5, quietMs(again))).toEqual([])
  })

  t.it(
    "delivers a released delivery again, flagged redelivered, its id kept where stable, counted where counted",
    async () => {
      await using q = await t.open()
      await q.publish(bytes("released"))
      const source = await q.open()
      const [d1] = await receiveAll(source, 1)
      if (d1 === undefined) throw new Error("nothing was delivered")
      await source.release([d1])
      const [d2] = await receiveAll(source, 1)
      if (d2 === undefined) throw new Error("the released delivery did not come again")
      expectRedelivery(d1, d2)
      await source.ack([d2])
    },
  )

  itWith(t, "delayedRelease")(
    "delivers a delivery released with a delay within its window no sooner than the delay",
    async () => {
      await using q = await t.open()
      await q.publish(bytes("delayed"))
      const source = await q.open()
      const [d1] = await receiveAll(source, 1)
      if (d1 === undefined) throw new Error("nothing was delivered")
      // A delay past the window is cut to it where the window bounds it (a Redis entry's idle time
      // cannot go below zero): the engine asks for less.
      const delayMs = Math.min(2500, source.keepAliveWithinMs ?? 2500)
      const releasedAt = Date.now()
      await source.release([d1], delayMs)
      const [d2] = await receiveAll(source, 1, 1, 20_000)
      // A little below the delay: the broker's clock and idle times round.
      expect(Date.now() - releasedAt).toBeGreaterThanOrEqual(delayMs - 300)
      if (d2 === undefined) throw new Error("the released delivery did not come again")
      expectRedelivery(d1, d2)
      await source.ack([d2])
    },
  )

  itWith(
    t,
    "delayedRelease",
    false,
  )("delivers a delivery released with a delay again at once, having no way to hold it back", async () => {
    await using q = await t.open()
    await q.publish(bytes("undelayed"))
    const source = await q.open()
    const [d1] = await receiveAll(source, 1)
    if (d1 === undefined) throw new Error("nothing was delivered")
    const releasedAt = Date.now()
    await source.release([d1], 60_000)
    const [d2] = await receiveAll(source, 1, 1, 20_000)
    expect(Date.now() - releasedAt).toBeLessThan(20_000)
    if (d2 === undefined) throw new Error("the released delivery did not come again")
    expectRedelivery(d1, d2)
    await source.ack([d2])
  })

  t.it("delivers what a source closed with deliveries unsettled held to the source opened again", async () => {
    await using q = await t.open()
    const published = ["held-0", "held-1", "held-2"]
    await q.publish(...published.map(bytes))
    const crashed = await q.open()
    const held = await receiveAll(crashed, 3)
    expect(sorted(held.map(text))).toEqual(published)
    await crashed.close()
    const again = await q.open()
    const back = await receiveAll(again, 3)
    expect(sorted(back.map(text))).toEqual(published)
    for (const d of back) {
      const first = held.find((h) => text(h) === text(d))
      if (first === undefined) throw new Error(`${text(d)} was not held before`)
      expectRedelivery(first, d)
    }
    await again.ack(back)
  })

  t.it(
    "takes without an error an ack of a closed source's delivery, which comes again, and an ack given twice",
    async () => {
      await using q = await t.open()
      await q.publish(bytes("late-ack"))
      const closed = await q.open()
      const held = await receiveAll(closed, 1)
      expect(held).toHaveLength(1)
      await closed.close()
      await closed.ack(held)
      const again = await q.open()
      const back = await receiveAll(again, 1)
      expect(back.map(text)).toEqual(["late-ack"])
      await again.ack(back)
      await again.ack(back)
      await again.close()
      const after = await q.open()
      expect(await after.receive(5, quietMs(after))).toEqual([])
    },
  )

  t.it("closes idempotently, flushing first the acks sent just before, and receives no more", async () => {
    await using q = await t.open()
    const published = ["flush-0", "flush-1", "flush-2"]
    await q.publish(...published.map(bytes))
    const source = await q.open()
    const got = await receiveAll(source, 3)
    expect(sorted(got.map(text))).toEqual(published)
    const acking = source.ack(got)
    await Promise.all([source.close(), source.close(), acking])
    await source.close()
    await expect(source.receive(1, 100)).rejects.toThrow()
    const again = await q.open()
    expect(await again.receive(5, quietMs(again))).toEqual([])
  })
}
