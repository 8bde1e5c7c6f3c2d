// The contract's claims and consumers: who may hold a file, in what order, and what each root
// keeps its own.
import { expect, it } from "bun:test"
import { accepted, claimAll, fail, itWith, type LedgerBackend, NOW, owner } from "./fixture.test.ts"

export function claims(b: LedgerBackend): void {
  it("gives each name to one owner only, even through two sessions, under distinct claim ids", async () => {
    await using t = await b.open()
    const again = await t.openAgain()
    const byA = await t.ledger.claim("owner-a", ["x.json", "y.json", "w.json"], NOW)
    const byB = await again.ledger.claim("owner-b", ["y.json", "z.json"], NOW)
    expect(byA.map((c) => c.name)).toEqual(["x.json", "y.json", "w.json"])
    expect(byB.map((c) => c.name)).toEqual(["z.json"])
    expect([...byA, ...byB].map((c) => c.attempts)).toEqual([1, 1, 1, 1])
    expect(new Set([...byA, ...byB].map((c) => c.claimId)).size).toBe(4)
    const owners = Object.fromEntries((await again.ledger.listClaims()).map((r) => [r.name, r.ownerId]))
    expect(owners).toEqual({ "x.json": "owner-a", "y.json": "owner-a", "w.json": "owner-a", "z.json": "owner-b" })
  })

  it("returns claims in the order asked and lists them in claim order, not by name: recovery redoes a batch in it", async () => {
    await using t = await b.open()
    const order = ["m-z.json", "m-b.json", "m-y.json", "m-a.json"]
    expect((await t.ledger.claim("o", order.slice(0, 2), NOW)).map((c) => c.name)).toEqual(order.slice(0, 2))
    expect((await t.ledger.claim("o", order.slice(2), NOW)).map((c) => c.name)).toEqual(order.slice(2))
    expect((await t.ledger.listClaims()).map((c) => c.name)).toEqual(order)
  })

  it("frees a name again after release, only by the owner holding it, and says how many it held", async () => {
    await using t = await b.open()
    const [c] = await claimAll(t.ledger, "o1", ["a.json"])
    if (c === undefined) throw new Error("no claim")
    expect(await t.ledger.release("o2", [c])).toBe(0)
    expect(await t.ledger.claim("o2", ["a.json"], NOW)).toEqual([])
    expect(await t.ledger.release("o1", [c])).toBe(1)
    expect(await t.ledger.release("o1", [])).toBe(0)
    expect((await t.ledger.claim("o2", ["a.json"], NOW)).map((x) => x.name)).toEqual(["a.json"])
  })

  it("forgets at the next claim only the committed claims it is given", async () => {
    await using t = await b.open()
    const [a, bb, c] = await claimAll(t.ledger, "o", ["a.json", "b.json", "c.json"])
    if (!a || !bb || !c) throw new Error("no claim")
    await t.ledger.commit("o", [accepted(a, "m-a"), accepted(bb, "m-b")], NOW)
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.state, r.dest])).toEqual([
      ["a.json", "committed", "done"],
      ["b.json", "committed", "done"],
      ["c.json", "claimed", null],
    ])
    // b's move may still be in flight; c is not committed, whether given under its id or another.
    const forget = [a, c, { ...c, claimId: "not-its-id" }]
    expect((await t.ledger.claim("o", ["a.json", "b.json"], NOW, forget)).map((x) => x.name)).toEqual(["a.json"])
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.state])).toEqual([
      ["b.json", "committed"],
      ["c.json", "claimed"],
      ["a.json", "claimed"],
    ])
  })

  it("never forgets a committed claim another owner holds, though it is given", async () => {
    await using t = await b.open()
    const [a] = await claimAll(t.ledger, "o", ["a.json"])
    const [d] = await claimAll(t.ledger, "other", ["d.json"])
    if (!a || !d) throw new Error("no claim")
    await t.ledger.commit("o", [accepted(a, "m-a")], NOW)
    await t.ledger.commit("other", [accepted(d, "m-d")], NOW)
    expect((await t.ledger.claim("o", ["a.json"], NOW, [a, d])).map((x) => x.name)).toEqual(["a.json"])
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.ownerId, r.state])).toEqual([
      ["d.json", "other", "committed"],
      ["a.json", "o", "claimed"],
    ])
  })

  it("claims an orphan only while its name is free", async () => {
    await using t = await b.open()
    const orphan = await t.ledger.claimOrphan("lost.json", "o", NOW)
    expect(orphan).toMatchObject({ name: "lost.json", attempts: 1 })
    expect(await t.ledger.claimOrphan("lost.json", "other", NOW)).toBeUndefined()
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.ownerId, r.claimId])).toEqual([
      ["lost.json", "o", orphan?.claimId ?? ""],
    ])
  })

  it("drops the claims it is given, whoever holds them, and only under their own claim ids", async () => {
    await using t = await b.open()
    const [a, bb] = await claimAll(t.ledger, "o", ["a.json", "b.json"])
    const [c] = await claimAll(t.ledger, "other", ["c.json"])
    if (!a || !bb || !c) throw new Error("no claim")
    await t.ledger.dropClaims([a, c, { ...bb, claimId: "not-its-id" }])
    await t.ledger.dropClaims([])
    expect((await t.ledger.listClaims()).map((r) => r.name)).toEqual(["b.json"])
  })

  it("lists its consumers and forgets only those that hold no claim", async () => {
    await using t = await b.open()
    for (const id of ["idle", "holding", "bystander"]) await t.ledger.registerConsumer(owner(id), NOW)
    await t.ledger.claim("holding", ["a.json"], NOW)
    const sorted = async () => (await t.ledger.listConsumers()).sort((x, y) => x.ownerId.localeCompare(y.ownerId))
    expect(await sorted()).toEqual(["bystander", "holding", "idle"].map(owner))
    await t.ledger.forgetConsumers(["idle", "holding"])
    await t.ledger.forgetConsumers([])
    expect((await sorted()).map((o) => o.ownerId)).toEqual(["bystander", "holding"])
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.owner?.ownerId, r.owner?.host])).toEqual([
      ["a.json", "holding", "test-host"],
    ])
  })

  it("unregisters a consumer with its committed claims, leaving the ones it holds uncommitted", async () => {
    await using t = await b.open()
    await t.ledger.registerConsumer(owner("o"), NOW)
    await t.ledger.registerConsumer(owner("stays"), NOW)
    const [a] = await claimAll(t.ledger, "o", ["a.json", "b.json"])
    if (!a) throw new Error("no claim")
    await t.ledger.commit("o", [accepted(a, "m-a")], NOW)
    await t.ledger.unregisterConsumer("o")
    expect((await t.ledger.listConsumers()).map((o) => o.ownerId)).toEqual(["stays"])
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.ownerId, r.state, r.owner])).toEqual([
      ["b.json", "o", "claimed", undefined],
    ])
  })

  it("keeps each root's claims, consumers and failures its own", async () => {
    await using t = await b.open()
    const other = await t.openOtherRoot()
    await t.ledger.registerConsumer(owner("x"), NOW)
    await other.ledger.registerConsumer(owner("z"), NOW)
    expect((await t.ledger.claim("x", ["m1.json", "m2.json"], NOW)).map((c) => c.name)).toEqual(["m1.json", "m2.json"])
    expect((await other.ledger.claim("z", ["m1.json"], NOW)).map((c) => c.name)).toEqual(["m1.json"])
    await fail(other.ledger, [["bad.json", "parse"]])
    await t.ledger.forgetConsumers(["z"])
    expect(await t.ledger.listConsumers()).toEqual([owner("x")])
    expect(await other.ledger.listConsumers()).toEqual([owner("z")])
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.ownerId])).toEqual([
      ["m1.json", "x"],
      ["m2.json", "x"],
    ])
    expect(await t.ledger.failureReasons()).toEqual(new Map())
    expect(await other.ledger.failureReasons()).toEqual(new Map([["bad.json", "parse"]]))
  })

  itWith(b, "sharedAcrossHosts")(
    "takes a msg_id processed under one root as a duplicate under every other",
    async () => {
      await using t = await b.open()
      const other = await t.openOtherRoot()
      const [a] = await claimAll(t.ledger, "x", ["a.json"])
      const [z] = await claimAll(other.ledger, "z", ["z.json"])
      if (!a || !z) throw new Error("no claim")
      expect(await t.commit("x", [accepted(a, "m-1")], NOW)).toEqual(["processed"])
      expect(await other.commit("z", [accepted(z, "m-1", { contentHash: "c-other" })], NOW)).toEqual(["conflict"])
      expect(await other.rows("SELECT msg_id FROM applied")).toEqual([{ msg_id: "m-1" }])
      expect((await t.ledger.stats(new Date(NOW))).allTime).toMatchObject({ processed: 1, duplicates: 1, conflicts: 1 })
    },
  )
}
