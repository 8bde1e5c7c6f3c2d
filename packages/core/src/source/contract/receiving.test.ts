// The contract's receiving: how much a receive hands over, how long it waits, and the bytes it
// hands over.
import { expect } from "bun:test"
import { bytes, receiveAll, type SourceTransport, sorted, text } from "./fixture.test.ts"

export function receiving(t: SourceTransport): void {
  t.it("returns at most max deliveries, and [] after waiting about waitMs when nothing is there", async () => {
    await using q = await t.open()
    const published = ["r-0", "r-1", "r-2", "r-3", "r-4"]
    await q.publish(...published.map(bytes))
    const source = await q.open()
    const seen: string[] = []
    const end = Date.now() + 15_000
    while (seen.length < published.length && Date.now() < end) {
      const batch = await source.receive(2, 5000)
      expect(batch.length).toBeGreaterThan(0)
      expect(batch.length).toBeLessThanOrEqual(2)
      seen.push(...batch.map(text))
      // Acked before the next: a broker that sends no more than a batch ahead would otherwise stall.
      await source.ack(batch)
    }
    expect(sorted(seen)).toEqual(published)
    const waitMs = 1500
    const started = performance.now()
    expect(await source.receive(3, waitMs)).toEqual([])
    const waited = performance.now() - started
    // Loose below (timers round), generous above (a loaded machine): the wait is bounded, not timed.
    expect(waited).toBeGreaterThanOrEqual(waitMs * 0.8)
    expect(waited).toBeLessThan(waitMs + 10_000)
  })

  t.it(
    "takes what is there without waiting out waitMs for a full batch, and wakes a wait when a message comes",
    async () => {
      await using q = await t.open()
      await q.publish(bytes("there-0"), bytes("there-1"))
      const source = await q.open()
      // Far from waitMs either way: a receive that waited it out would take a minute.
      let started = performance.now()
      const there = []
      while (there.length < 2 && performance.now() - started < 20_000)
        there.push(...(await source.receive(100, 60_000)))
      expect(sorted(there.map(text))).toEqual(["there-0", "there-1"])
      expect(performance.now() - started).toBeLessThan(20_000)
      await source.ack(there)
      started = performance.now()
      const waiting = source.receive(5, 60_000)
      await Bun.sleep(200)
      await q.publish(bytes("late"))
      const late = await waiting
      expect(late.map(text)).toEqual(["late"])
      expect(performance.now() - started).toBeLessThan(20_000)
      await source.ack(late)
    },
  )

  t.it("hands over each body byte for byte: any bytes, and UTF-8 with multi-byte characters", async () => {
    await using q = await t.open()
    const binary = Uint8Array.from({ length: 256 }, (_, i) => 255 - i)
    const utf8 = bytes('{"msg_id":"ü-1","note":"naïve café – 日本語 🧾"}\n')
    await q.publish(binary, utf8)
    const source = await q.open()
    const got = await receiveAll(source, 2)
    expect(got).toHaveLength(2)
    const asArrays = got.map((d) => [...d.body]).sort((a, b) => a.length - b.length)
    expect(asArrays).toEqual([[...utf8], [...binary]].sort((a, b) => a.length - b.length))
    await source.ack(got)
  })

  t.it("ends a long wait promptly when the signal aborts, with []", async () => {
    await using q = await t.open()
    const source = await q.open()
    const stop = new AbortController()
    const started = performance.now()
    setTimeout(() => stop.abort(), 100)
    expect(await source.receive(5, 60_000, stop.signal)).toEqual([])
    expect(performance.now() - started).toBeLessThan(10_000)
  })
}
