// The contract's recovery: taking over a dead owner's claims, the poison counter, who still
// holds a claim, and the heartbeat a lease is judged by.
import { expect, it } from "bun:test"
import { accepted, claimAll, itWith, type LedgerBackend, NOW, owner, rejected } from "./fixture.test.ts"

export function recovery(b: LedgerBackend): void {
  it("gives each dead owner's claim to exactly one of two recovering consumers", async () => {
    await using t = await b.open()
    const again = await t.openAgain()
    await claimAll(t.ledger, "dead", ["a.json", "b.json"])
    const [listed, byOther] = [await t.ledger.listClaims(), await again.ledger.listClaims()]
    expect((await t.ledger.adoptClaims(listed, "x")).map((r) => [r.name, r.ownerId, r.state])).toEqual([
      ["a.json", "x", "claimed"],
      ["b.json", "x", "claimed"],
    ])
    expect(await again.ledger.adoptClaims(byOther, "y")).toEqual([])
    expect(await again.ledger.adoptClaims([], "y")).toEqual([])
    expect((await t.ledger.listClaims()).map((r) => r.ownerId)).toEqual(["x", "x"])
  })

  it("adopts a claim in the state the takeover finds, not as it was listed", async () => {
    // An owner judged dead may only have been stopped: resumed, it commits after the listing.
    await using t = await b.open()
    const [a, bb] = await claimAll(t.ledger, "slow", ["a.json", "b.json"])
    if (!a || !bb) throw new Error("no claim")
    const listed = await t.ledger.listClaims()
    expect(listed.map((r) => r.state)).toEqual(["claimed", "claimed"])
    await t.ledger.commit("slow", [accepted(a, "m-a")], NOW)
    const adopted = await t.ledger.adoptClaims(listed, "me")
    expect(adopted.map((r) => [r.name, r.ownerId, r.state, r.dest])).toEqual([
      ["a.json", "me", "committed", "done"],
      ["b.json", "me", "claimed", null],
    ])
  })

  it("adopts a committed claim with the payload hash of the file it committed, whatever its outcome", async () => {
    // Recovery moves a committed claim's file on only if processing/ still holds that very file:
    // one judged unread is known by its identity, kept on the claim row but not in the history.
    await using t = await b.open()
    const [a, d, r, u, c, i] = await claimAll(t.ledger, "dead", [
      "a.json",
      "d.json",
      "r.json",
      "u.json",
      "c.json",
      "i.json",
    ])
    if (!a || !d || !r || !u || !c || !i) throw new Error("no claim")
    await t.ledger.commit(
      "dead",
      [
        accepted(a, "m-a"),
        accepted(d, "m-a", { hash: "bytes-d.json" }),
        rejected(r, "parse", { hash: "bytes-r.json" }),
      ],
      NOW,
    )
    await t.ledger.commit(
      "dead",
      [rejected(u, "symlink"), rejected(i, "too-large", { identity: "lstat:7:900:1" })],
      NOW,
    )
    const adopted = await t.ledger.adoptClaims(await t.ledger.listClaims(), "me")
    expect(adopted.map((row) => [row.name, row.state, row.dest, row.payloadHash])).toEqual([
      ["a.json", "committed", "done", "bytes-a.json"],
      ["d.json", "committed", "done", "bytes-d.json"],
      ["r.json", "committed", "error", "bytes-r.json"],
      ["u.json", "committed", "error", null],
      ["c.json", "claimed", null, null],
      ["i.json", "committed", "error", "lstat:7:900:1"],
    ])
    expect((await t.ledger.unreplayedFailure("i.json"))?.payloadHash).toBeNull()
  })

  itWith(b, "asyncEffect")(
    "waits for a dead owner's commit in flight and adopts its claim as that commit left it",
    async () => {
      // A consumer killed in the middle of its commit leaves the transaction to the server, which
      // can still commit it after the next consumer has listed the claims as claimed.
      await using dying = await b.open()
      const next = await dying.openAgain()
      const [a] = await claimAll(dying.ledger, "dying", ["a.json"])
      if (!a) throw new Error("no claim")
      let entered!: () => void
      let release!: () => void
      const inEffect = new Promise<void>((resolve) => (entered = resolve))
      const gate = new Promise<void>((resolve) => (release = resolve))
      const committing = dying.commit("dying", [accepted(a, "m-a")], NOW, async () => {
        entered()
        await gate
      })
      await inEffect
      const listed = await next.ledger.listClaims()
      expect(listed.map((r) => [r.name, r.state])).toEqual([["a.json", "claimed"]])
      const adopting = next.ledger.adoptClaims(listed, "me")
      await Bun.sleep(100) // the adoption now waits on the commit's row lock
      release()
      expect(await committing).toEqual(["processed"])
      expect((await adopting).map((r) => [r.name, r.ownerId, r.state, r.dest])).toEqual([
        ["a.json", "me", "committed", "done"],
      ])
    },
  )

  it("says whether an owner still holds a claim: no longer once it is taken over or ended", async () => {
    await using t = await b.open()
    const [a, bb] = await claimAll(t.ledger, "o", ["a.json", "b.json"])
    if (!a || !bb) throw new Error("no claim")
    expect(await t.ledger.holdsClaim("a.json", a.claimId, "o")).toBe(true)
    expect(await t.ledger.holdsClaim("a.json", a.claimId, "other")).toBe(false)
    expect(await t.ledger.holdsClaim("a.json", bb.claimId, "o")).toBe(false)
    await t.ledger.adoptClaims((await t.ledger.listClaims()).slice(0, 1), "other")
    expect(await t.ledger.holdsClaim("a.json", a.claimId, "o")).toBe(false)
    expect(await t.ledger.holdsClaim("a.json", a.claimId, "other")).toBe(true)
    // Committed, it is still held until it is forgotten.
    await t.ledger.commit("o", [accepted(bb, "m-b")], NOW)
    expect(await t.ledger.holdsClaim("b.json", bb.claimId, "o")).toBe(true)
    await t.ledger.claim("o", [], NOW, [bb])
    expect(await t.ledger.holdsClaim("b.json", bb.claimId, "o")).toBe(false)
  })

  it("counts an attempt on a held claim, and takes one back only while held, uncommitted and above one", async () => {
    await using t = await b.open()
    const [a] = await claimAll(t.ledger, "o", ["a.json"])
    if (!a) throw new Error("no claim")
    const attempts = async () => (await t.ledger.listClaims()).map((r) => r.attempts)
    expect(await t.ledger.uncountAttempt(a, "o")).toBe(false)
    const counted = await t.ledger.startAttempt(a, "o")
    expect(counted).toEqual({ ...a, attempts: 2 })
    expect(await attempts()).toEqual([2])
    await t.ledger.startAttempt(counted, "other")
    expect(await attempts()).toEqual([2])
    expect(await t.ledger.uncountAttempt(counted, "other")).toBe(false)
    expect(await t.ledger.uncountAttempt(counted, "o")).toBe(true)
    expect(await attempts()).toEqual([1])
    await t.ledger.startAttempt(a, "o")
    await t.ledger.commit("o", [accepted(a, "m-a")], NOW)
    expect(await t.ledger.uncountAttempt(counted, "o")).toBe(false)
    expect(await attempts()).toEqual([2])
  })

  it("dates a heartbeat by the ledger's own clock where it has one, else by the time the consumer gives", async () => {
    await using t = await b.open()
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString()
    await t.ledger.registerConsumer(owner("o"), hourAgo)
    await t.ledger.claim("o", ["a.json"], hourAgo)
    const heartbeat = async () => {
      const [row] = await t.ledger.listClaims()
      if (row?.owner === undefined) throw new Error("no owner")
      return { at: row.owner.heartbeatAt, ageMs: row.owner.heartbeatAgeMs }
    }
    const before = await heartbeat()
    const justNow = new Date().toISOString()
    await t.ledger.flush("o", justNow)
    const after = await heartbeat()
    if (b.features.serverClock) {
      expect(before.ageMs).toBeLessThan(60_000)
      expect(Date.parse(after.at)).toBeGreaterThanOrEqual(Date.parse(before.at))
    } else {
      expect(before).toMatchObject({ at: hourAgo })
      expect(before.ageMs).toBeGreaterThanOrEqual(3_600_000)
      expect(after.at).toBe(justNow)
    }
    expect(after.ageMs).toBeLessThan(60_000)
  })

  it("runs work lazily as asked and returns what it returns, for a flush to make durable", async () => {
    await using t = await b.open()
    const again = await t.openAgain()
    const claimed = await t.ledger.lazily(() => t.ledger.claim("o", ["a.json"], NOW))
    expect(claimed.map((c) => c.name)).toEqual(["a.json"])
    await t.ledger.flush("o", NOW)
    expect((await again.ledger.listClaims()).map((r) => r.name)).toEqual(["a.json"])
  })
}
