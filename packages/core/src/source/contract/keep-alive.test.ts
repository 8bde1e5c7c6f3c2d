// The contract's keeping alive: a delivery in hand past the source's window stays this
// consumer's only while it is kept alive, from the source or from its keeper module.
import { expect } from "bun:test"
import type { Delivery, KeeperModule, SourcePort } from "../port.ts"
import { bytes, itWith, receiveAll, type SourceTransport, text } from "./fixture.test.ts"

/** Keeps `kept` alive with `keep` every quarter window for 3.5 windows while a second consumer takes what comes; what it took. */
async function takenMeanwhile(holder: SourcePort, second: SourcePort, keep: () => Promise<void>): Promise<Delivery[]> {
  const windowMs = holder.keepAliveWithinMs ?? 0
  const until = Date.now() + 3.5 * windowMs
  const keeping = (async () => {
    while (Date.now() < until) {
      await keep()
      await Bun.sleep(windowMs / 4)
    }
  })()
  const taken: Delivery[] = []
  while (Date.now() < until) {
    const batch = await second.receive(10, 300)
    taken.push(...batch)
    await second.ack(batch)
  }
  await keeping
  return taken
}

export function keepAlive(t: SourceTransport): void {
  /** Released and received again, `kept` is counted once more than at first: keeping it alive delivered it to no one. */
  const expectUncounted = async (holder: SourcePort, kept: Delivery) => {
    await holder.release([kept])
    const [again] = await receiveAll(holder, 1)
    expect(again && text(again)).toBe("kept")
    if (t.features.countsDeliveries) expect(again?.deliveryCount).toBe((kept.deliveryCount ?? 1) + 1)
    await holder.ack(again ? [again] : [])
  }

  t.it("says a window where deliveries need keeping alive, and a keeper module where it has one", async () => {
    await using q = await t.open()
    const source = await q.open()
    expect(source.keepAliveWithinMs !== undefined).toBe(t.features.needsKeepAlive)
    if (source.keepAliveWithinMs !== undefined) expect(source.keepAliveWithinMs).toBeGreaterThan(0)
    expect(source.keeper !== undefined).toBe(t.features.hasKeeper)
    if (source.keeper !== undefined) {
      const module = (await import(source.keeper.module)) as Partial<KeeperModule>
      expect(typeof module.openKeeper).toBe("function")
      // The engine hands the options to a Worker: they must survive a structured clone.
      expect(structuredClone(source.keeper.options)).toEqual(source.keeper.options)
    }
  })

  const holding = async (q: Awaited<ReturnType<SourceTransport["open"]>>) => {
    await q.publish(bytes("kept"), bytes("neglected"))
    const holder = await q.open()
    const got = await receiveAll(holder, 2)
    const kept = got.find((d) => text(d) === "kept")
    if (kept === undefined || got.length !== 2) throw new Error("both deliveries did not come")
    return { holder, kept, second: await q.open("second") }
  }

  itWith(t, "needsKeepAlive")(
    "keeps a delivery kept alive within keepAliveWithinMs from a second consumer, which takes the one neglected",
    async () => {
      await using q = await t.open()
      const { holder, kept, second } = await holding(q)
      const taken = await takenMeanwhile(holder, second, () => holder.keepAlive([kept]))
      expect(taken.map(text)).toEqual(["neglected"])
      await expectUncounted(holder, kept)
    },
  )

  itWith(t, "hasKeeper")(
    "keeps a delivery from a second consumer through its keeper module, given the delivery's keep token",
    async () => {
      await using q = await t.open()
      const { holder, kept, second } = await holding(q)
      if (holder.keeper === undefined || kept.keepToken === undefined) throw new Error("no keeper or no keep token")
      const module = (await import(holder.keeper.module)) as KeeperModule
      const keeper = await module.openKeeper(structuredClone(holder.keeper.options))
      const token = kept.keepToken
      try {
        const taken = await takenMeanwhile(holder, second, () => keeper.keep([token]))
        expect(taken.map(text)).toEqual(["neglected"])
      } finally {
        await keeper.close()
      }
      await expectUncounted(holder, kept)
    },
  )
}
