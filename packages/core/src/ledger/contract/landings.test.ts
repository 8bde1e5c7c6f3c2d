// The contract's landed broker deliveries: claimed with the source's attempts and their origin in
// one transaction, and recognised once a commit gave them an outcome, whatever the outcome and
// however many pickups a deferral took; other bytes under the same name, or an outcome not yet
// committed, are not.
import { expect, it } from "bun:test"
import { TransientError } from "../../transient.ts"
import { type Claim, type Landing, landingKey } from "../model.ts"
import { accepted, FAR, fail, LATER, type LedgerBackend, NOW, rejected } from "./fixture.test.ts"

function landing(name: string, payloadHash: string, attempts = 1): Landing {
  return {
    name,
    attempts,
    payloadHash,
    deliveryId: `ORDERS:${name}`,
    origin: {
      source: "nats://127.0.0.1:4222/?stream=ORDERS&consumer=spool",
      address: "orders.new",
      headers: { trace: "t\u0000x" },
      messageId: "m\ud800",
    },
  }
}

const pair = (name: string, payloadHash: string) => ({ name, payloadHash })

export function landings(b: LedgerBackend): void {
  it("claims landed deliveries with the source's attempts and keeps each origin, storable", async () => {
    await using t = await b.open()
    const claims = await t.ledger.claimLanded("o", [landing("a.json", "h-a", 3), landing("b.json", "h-b")], NOW)
    expect(claims.map((c) => [c.name, c.attempts])).toEqual([
      ["a.json", 3],
      ["b.json", 1],
    ])
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.attempts, r.state])).toEqual([
      ["a.json", 3, "claimed"],
      ["b.json", 1, "claimed"],
    ])
    expect(
      await t.rows("SELECT name, payload_hash, delivery_id, address, headers, message_id FROM origins ORDER BY name"),
    ).toEqual([
      {
        name: "a.json",
        payload_hash: "h-a",
        delivery_id: "ORDERS:a.json",
        address: "orders.new",
        headers: '{"trace":"t\\u0000x"}',
        message_id: "m\\ud800",
      },
      {
        name: "b.json",
        payload_hash: "h-b",
        delivery_id: "ORDERS:b.json",
        address: "orders.new",
        headers: '{"trace":"t\\u0000x"}',
        message_id: "m\\ud800",
      },
    ])
    // A name held already is not claimed again, and its origin is not written twice.
    expect(await t.ledger.claimLanded("p", [landing("a.json", "h-a2")], NOW)).toEqual([])
    expect(await t.rows("SELECT name FROM origins ORDER BY name")).toEqual([{ name: "a.json" }, { name: "b.json" }])
  })

  it("lists the sources it keeps origins of, each once, sorted", async () => {
    await using t = await b.open()
    expect(await t.ledger.landedSources()).toEqual([])
    const amqp = {
      ...landing("c.json", "h-c"),
      origin: { source: "amqp://guest@127.0.0.1:5672/?queue=q", address: "q" },
    }
    await t.ledger.claimLanded("o", [landing("a.json", "h-a"), landing("b.json", "h-b"), amqp], NOW)
    expect(await t.ledger.landedSources()).toEqual([
      "amqp://guest@127.0.0.1:5672/?queue=q",
      "nats://127.0.0.1:4222/?stream=ORDERS&consumer=spool",
    ])
  })

  it("tells the claims that landed a delivery, or picked one up from deferred/, from a file's", async () => {
    await using t = await b.open()
    const policy = { firstMs: 1000, maxMs: 1000, maxAgeMs: 86_400_000 }
    const [d, l] = (await t.ledger.claimLanded("o", [landing("d.json", "h-d"), landing("l.json", "h-l")], NOW)) as [
      Claim,
      Claim,
    ]
    const [f] = (await t.ledger.claim("o", ["f.json"], NOW)) as [Claim]
    expect(await t.ledger.landedClaims([d.claimId, f.claimId, l.claimId, "no-such-claim"])).toEqual(
      new Set([d.claimId, l.claimId]),
    )
    expect(await t.ledger.landedClaims([])).toEqual(new Set())
    const down = () => {
      throw new TransientError("down")
    }
    expect(await t.commit("o", [accepted(d, "m-d", { hash: "h-d" })], NOW, down, policy)).toEqual(["deferred"])
    await t.ledger.claim("o", [], NOW, [d])
    const due = new Date(Date.parse(NOW) + 1000).toISOString()
    const [picked] = (await t.ledger.claimDue("o", await t.ledger.dueDeferrals(due, 10), due)) as [Claim]
    expect(await t.ledger.landedClaims([picked.claimId, f.claimId])).toEqual(new Set([picked.claimId]))
  })

  it("recognises a landed pair once a commit gave it an outcome, and only that pair", async () => {
    await using t = await b.open()
    const [a, r, p] = (await t.ledger.claimLanded(
      "o",
      [landing("a.json", "h-a"), landing("r.json", "h-r"), landing("p.json", "h-p")],
      NOW,
    )) as [Claim, Claim, Claim]
    const asked = [pair("a.json", "h-a"), pair("r.json", "h-r"), pair("p.json", "h-p"), pair("a.json", "other")]
    expect(await t.ledger.committedLandings(asked)).toEqual(new Set())
    // A poison failure is never read: its row has no payload hash, the origin has it.
    const verdicts = await t.commit(
      "o",
      [accepted(a, "m-a", { hash: "h-a" }), rejected(r, "parse", { hash: "h-r" }), rejected(p, "poison")],
      NOW,
    )
    expect(verdicts).toEqual(["processed", "rejected", "rejected"])
    expect(await t.ledger.committedLandings(asked)).toEqual(
      new Set([landingKey("a.json", "h-a"), landingKey("r.json", "h-r"), landingKey("p.json", "h-p")]),
    )
    expect(await t.ledger.committedLandings([])).toEqual(new Set())
    // A later delivery of the same bytes under the same name, committed as a duplicate, is recognised too.
    await t.ledger.claim("o", [], NOW, [a, r, p])
    const [again] = (await t.ledger.claimLanded("o", [landing("a.json", "h-a")], NOW)) as [Claim]
    expect(await t.commit("o", [accepted(again, "m-a", { hash: "h-a" })], NOW)).toEqual(["duplicate"])
    expect(await t.ledger.committedLandings([pair("a.json", "h-a")])).toEqual(new Set([landingKey("a.json", "h-a")]))
  })

  it("recognises a deferred landing, and its outcome after the pickup", async () => {
    await using t = await b.open()
    const policy = { firstMs: 1000, maxMs: 1000, maxAgeMs: 86_400_000 }
    const [d] = (await t.ledger.claimLanded("o", [landing("d.json", "h-d", 2)], NOW)) as [Claim]
    const down = () => {
      throw new TransientError("down")
    }
    expect(await t.commit("o", [accepted(d, "m-d", { hash: "h-d" })], NOW, down, policy)).toEqual(["deferred"])
    const key = new Set([landingKey("d.json", "h-d")])
    expect(await t.ledger.committedLandings([pair("d.json", "h-d")])).toEqual(key)
    await t.ledger.claim("o", [], NOW, [d])
    const due = new Date(Date.parse(NOW) + 1000).toISOString()
    const [picked] = (await t.ledger.claimDue("o", await t.ledger.dueDeferrals(due, 10), due)) as [Claim]
    expect(await t.commit("o", [accepted(picked, "m-d", { hash: "h-d" })], due)).toEqual(["processed"])
    expect(await t.ledger.deferralCounts(due)).toEqual({ deferred: 0, due: 0 })
    expect(await t.ledger.committedLandings([pair("d.json", "h-d")])).toEqual(key)
  })

  it("gives the origin of a landed failure in error/ until it is replayed, and none for a dropped file", async () => {
    await using t = await b.open()
    const [a, z] = (await t.ledger.claimLanded("o", [landing("a.json", "h-a"), landing("z.json", "h-z")], NOW)) as [
      Claim,
      Claim,
    ]
    expect(await t.ledger.failureOrigin("a.json")).toBeUndefined()
    await t.commit("o", [rejected(a, "parse", { hash: "h-a" }), accepted(z, "m-z", { hash: "h-z" })], NOW)
    await t.ledger.claim("o", [], NOW, [a, z])
    await fail(t.ledger, [["dropped.json", "parse"]])
    expect(await t.ledger.failureOrigin("a.json")).toEqual({
      claimId: a.claimId,
      origin: {
        source: "nats://127.0.0.1:4222/?stream=ORDERS&consumer=spool",
        address: "orders.new",
        headers: { trace: "t\u0000x" },
        // Stored as storable text: the lone surrogate written out.
        messageId: "m\\ud800",
      },
    })
    // Processed, not in error/: nothing to replay.
    expect(await t.ledger.failureOrigin("z.json")).toBeUndefined()
    expect(await t.ledger.failureOrigin("dropped.json")).toBeUndefined()
    expect(await t.ledger.markReplayed("a.json", NOW)).toBe(true)
    expect(await t.ledger.failureOrigin("a.json")).toBeUndefined()
  })

  it("compact forgets the origins no redelivery or replay needs any more, past the retention", async () => {
    await using t = await b.open()
    const [done, failed, replayed] = (await t.ledger.claimLanded(
      "o",
      [
        landing("done.json", "h-d"),
        landing("failed.json", "h-f"),
        landing("replayed.json", "h-r"),
        landing("held.json", "h-h"),
      ],
      NOW,
    )) as [Claim, Claim, Claim]
    await t.commit(
      "o",
      [
        accepted(done, "m-d", { hash: "h-d" }),
        rejected(failed, "parse", { hash: "h-f" }),
        rejected(replayed, "parse", { hash: "h-r" }),
      ],
      NOW,
    )
    await t.ledger.claim("o", [], NOW, [done, failed, replayed])
    await t.ledger.markReplayed("replayed.json", NOW)
    const names = async () => (await t.rows("SELECT name FROM origins ORDER BY name")).map((r) => r.name)
    // Within the retention every origin stays.
    expect((await t.ledger.compact(NOW, undefined, LATER)).origins).toBe(0)
    expect((await t.ledger.compact(FAR, undefined, LATER, { dryRun: true })).origins).toBe(2)
    expect(await names()).toEqual(["done.json", "failed.json", "held.json", "replayed.json"])
    // Past it: the failure still in error/ and the claim still in hand keep theirs.
    expect((await t.ledger.compact(FAR, undefined, LATER)).origins).toBe(2)
    expect(await names()).toEqual(["failed.json", "held.json"])
    expect((await t.ledger.failureOrigin("failed.json"))?.claimId).toBe(failed.claimId)
    expect(await t.ledger.committedLandings([pair("held.json", "h-h")])).toEqual(new Set())
  })
}
