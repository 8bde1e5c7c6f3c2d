// The broker intake's groups, against an in-process source: deliveries the source counted
// --max-attempts times go through alone and first, a stop between groups hands the rest back,
// and what has left the hand is no longer kept alive.
import { afterEach, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SqliteLedger } from "../ledger/sqlite/ledger.ts"
import { createQueue, type Queue } from "../queue/root.ts"
import type { Delivery, SourcePort } from "../source/port.ts"
import { consume } from "./engine.ts"

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

function tempQueue(): { q: Queue; ledger: SqliteLedger } {
  const dir = fs.mkdtempSync(join(tmpdir(), "spool-source-loop-"))
  dirs.push(dir)
  const q = createQueue(join(dir, "q"))
  return { q, ledger: SqliteLedger.open(q.ledger, { durable: false }) }
}

/** A delivery with a stable id, counted `count` times by its source. */
function delivery(id: string, count: number): Delivery {
  const body = JSON.stringify({ msg_id: `m-${id}`, order_no: "A", seq: Number(id) + 1, amount: 1.5 })
  return {
    id,
    stableId: true,
    body: new TextEncoder().encode(body),
    deliveryCount: count,
    redelivered: count > 1,
    origin: { source: "nats://127.0.0.1:4222/?stream=S&consumer=C", address: "S" },
  }
}

/** A source that hands out `batches` one receive at a time and records what is done with each delivery, in order. */
function fakeSource(batches: Delivery[][]) {
  const events: string[] = []
  const source: SourcePort = {
    describe: "fake",
    keepAliveWithinMs: 150,
    receive: async () => batches.shift() ?? [],
    ack: async (ds) => void events.push(...ds.map((d) => `ack ${d.id}`)),
    release: async (ds) => void events.push(...ds.map((d) => `release ${d.id}`)),
    keepAlive: async (ds) => void events.push(`keep ${ds.map((d) => d.id).join(",")}`),
    publish: async () => {},
    close: async () => {},
  }
  return { source, events }
}

describe("a broker batch with deliveries counted --max-attempts times", () => {
  it("takes each alone, first, then the rest together; keeps alive only what is still in hand", async () => {
    const t = tempQueue()
    const f = fakeSource([[delivery("0", 1), delivery("1", 3), delivery("2", 1), delivery("3", 5)]])
    const committed: string[][] = []
    // A commit that waits: the main thread's keep-alive timer (every 50 ms) runs meanwhile.
    const onCommit = async (outcomes: readonly { name: string }[]) => {
      committed.push(outcomes.map((o) => o.name))
      await Bun.sleep(200)
    }
    const summary = await consume({ queue: t.q, ledger: t.ledger, source: f.source, idleWaitMs: 10, onCommit })
    t.ledger.close()
    expect(summary.processed).toBe(4)
    const name = (id: string) => `nats-${id}.json`
    expect(committed).toEqual([[name("1")], [name("3")], [name("0"), name("2")]])
    expect(f.events.filter((e) => e.startsWith("ack"))).toEqual(["ack 1", "ack 3", "ack 0", "ack 2"])
    // Each keep-alive holds exactly what has not been acknowledged yet.
    for (const [i, e] of f.events.entries()) {
      if (!e.startsWith("keep")) continue
      const acked = new Set(f.events.slice(0, i).flatMap((a) => (a.startsWith("ack") ? [a.slice(4)] : [])))
      expect(e).toBe(`keep ${["0", "1", "2", "3"].filter((id) => !acked.has(id)).join(",")}`)
    }
    expect(f.events).toContain("keep 0,2,3")
    expect(f.events).toContain("keep 0,2")
    expect(fs.readdirSync(t.q.processing)).toEqual([])
  })

  it("hands back the groups not yet claimed when stopped between two", async () => {
    const t = tempQueue()
    const f = fakeSource([[delivery("0", 1), delivery("1", 3), delivery("2", 3)]])
    const stop = new AbortController()
    const onCommit = () => stop.abort()
    const summary = await consume({
      queue: t.q,
      ledger: t.ledger,
      source: f.source,
      idleWaitMs: 10,
      signal: stop.signal,
      onCommit,
    })
    expect(summary.processed).toBe(1)
    expect(f.events.filter((e) => !e.startsWith("keep"))).toEqual(["ack 1", "release 2", "release 0"])
    expect(fs.readdirSync(t.q.processing)).toEqual([])
    expect(t.ledger.listClaims()).toEqual([])
    t.ledger.close()
  })
})
