// The contract's publish: a replay sent back to a delivery's origin.
import { expect } from "bun:test"
import { replayHeader } from "../port.ts"
import { bytes, drain, receiveAll, type SourceTransport, text } from "./fixture.test.ts"

export function replay(t: SourceTransport): void {
  t.it(
    "publishes a body back to its origin, received again with the replay header, under one stable id of its own",
    async () => {
      await using q = await t.open()
      await q.publish(bytes('{"msg_id":"replayed"}'))
      const source = await q.open()
      const [original] = await receiveAll(source, 1)
      if (original === undefined) throw new Error("nothing was delivered")
      await source.ack([original])
      const origin = { ...original.origin, headers: { ...original.origin.headers, [replayHeader]: "claim-contract-1" } }
      // Published twice, as after a crash between the confirm and the replay's bookkeeping: a
      // transport that deduplicates keeps one, any other delivers both under the same id.
      await source.publish(origin, original.body)
      await source.publish(origin, original.body)
      const replays = await drain(source, 1500)
      expect(replays.length).toBeGreaterThanOrEqual(1)
      expect(replays.length).toBeLessThanOrEqual(2)
      for (const r of replays) {
        expect(text(r)).toBe('{"msg_id":"replayed"}')
        expect(r.origin.address).toBe(original.origin.address)
        expect(r.origin.headers?.[replayHeader]).toBe("claim-contract-1")
        expect(r.stableId).toBe(true)
        expect(r.id).not.toBe(original.id)
      }
      expect(new Set(replays.map((r) => r.id)).size).toBe(1)
    },
  )
}
