// The contract's deferrals: a delivery whose effect failed transiently waits in deferred/ with a
// row that says when to try again, is picked up once when due, and ends with its outcome.
import { expect, it } from "bun:test"
import { TransientError } from "../../transient.ts"
import type { Claim } from "../model.ts"
import { accepted, claimAll, type LedgerBackend, type LedgerUnderTest, NOW } from "./fixture.test.ts"

const policy = { firstMs: 60_000, maxMs: 3_600_000, maxAgeMs: 86_400_000 }
const at = (ms: number) => new Date(Date.parse(NOW) + ms).toISOString()
const down = () => {
  throw new TransientError("the bank is down")
}

/** Claims `name` and defers its delivery of `msgId` at `now`, then forgets the claim as its move out does. */
async function deferred(t: LedgerUnderTest, name: string, msgId: string, now = NOW): Promise<Claim> {
  const [c] = await claimAll(t.ledger, "o", [name], now)
  if (!c) throw new Error("no claim")
  expect(await t.commit("o", [accepted(c, msgId)], now, down, policy)).toEqual(["deferred"])
  await t.ledger.claim("o", [], now, [c])
  return c
}

/** Picks up the due deferral of `file` at `now` for `ownerId`. */
async function pickUp(t: LedgerUnderTest, file: string, now: string, ownerId = "o"): Promise<Claim> {
  const due = (await t.ledger.dueDeferrals(now, 10)).filter((d) => d.file === file)
  const [c] = await t.ledger.claimDue(ownerId, due, now)
  if (!c) throw new Error(`${file} was not picked up`)
  return c
}

export function deferrals(b: LedgerBackend): void {
  it("defers a delivery whose effect fails transiently: its row says when to try again, its claim points at deferred/", async () => {
    await using t = await b.open()
    const [c] = await claimAll(t.ledger, "o", ["a.json"])
    if (!c) throw new Error("no claim")
    expect(await t.commit("o", [accepted(c, "m-a")], NOW, down, policy)).toEqual(["deferred"])
    const row = {
      file: "a.json",
      msgId: "m-a",
      attempts: 1,
      firstDeferredAt: NOW,
      nextAttemptAt: at(60_000),
      lastError: "the bank is down",
      claimId: c.claimId,
      // The delivery's payload hash: recovery tells a lost pickup in processing/ by it.
      payloadHash: "bytes-a.json",
    }
    expect(await t.ledger.deferralOf(c.claimId)).toEqual(row)
    expect(await t.ledger.deferralOf("no-such-claim")).toBeUndefined()
    expect(await t.ledger.deferralsAt(["a.json", "b.json"])).toEqual(new Map([["a.json", row]]))
    expect(await t.ledger.deferralsAt([])).toEqual(new Map())
    expect((await t.ledger.listClaims()).map((r) => [r.state, r.dest, r.destName])).toEqual([
      ["committed", "deferred", "a.json"],
    ])
    expect(await t.rows("SELECT msg_id FROM applied")).toEqual([])
    expect(await t.rows("SELECT msg_id FROM processed")).toEqual([])
    expect(await t.ledger.nextDeferralAt()).toBe(at(60_000))
    expect(await t.ledger.deferralCounts(NOW)).toEqual({ deferred: 1, due: 0 })
    expect(await t.ledger.deferralCounts(at(60_000))).toEqual({ deferred: 1, due: 1 })
    expect(await t.ledger.dueDeferrals(NOW, 10)).toEqual([])
    expect(await t.ledger.dueDeferrals(at(60_000), 10)).toEqual([row])
  })

  it("lists due deferrals earliest first, at most as many as asked, and has no next time with none waiting", async () => {
    await using t = await b.open()
    expect(await t.ledger.nextDeferralAt()).toBeUndefined()
    expect(await t.ledger.deferralCounts(NOW)).toEqual({ deferred: 0, due: 0 })
    await deferred(t, "late.json", "m-late", at(30_000))
    await deferred(t, "b.json", "m-b")
    await deferred(t, "a.json", "m-a")
    const due = async (limit: number) => (await t.ledger.dueDeferrals(at(600_000), limit)).map((d) => d.file)
    expect(await due(10)).toEqual(["a.json", "b.json", "late.json"])
    expect(await due(2)).toEqual(["a.json", "b.json"])
    expect(await t.ledger.nextDeferralAt()).toBe(at(60_000))
  })

  it("picks up a due deferral once, making its row the new claim's; a stale listing or an early one claims nothing", async () => {
    await using t = await b.open()
    await deferred(t, "a.json", "m-a")
    const listed = await t.ledger.dueDeferrals(at(60_000), 10)
    expect(await t.ledger.claimDue("early", listed, at(59_999))).toEqual([])
    const [c] = await t.ledger.claimDue("o2", listed, at(60_000))
    expect(c).toMatchObject({ name: "a.json", attempts: 1 })
    expect(await t.ledger.deferralOf(c?.claimId ?? "")).toMatchObject({ file: "a.json", attempts: 1 })
    await t.ledger.release("o2", c ? [c] : [])
    expect(await t.ledger.claimDue("o3", listed, at(60_000))).toEqual([])
    expect((await t.ledger.listClaims()).map((r) => r.ownerId)).toEqual([])
  })

  it("carries attempts and the first deferral over a second transient failure, and closes the row with the outcome", async () => {
    await using t = await b.open()
    await deferred(t, "a.json", "m-a")
    const second = await pickUp(t, "a.json", at(60_000))
    expect(await t.commit("o", [accepted(second, "m-a")], at(60_000), down, policy)).toEqual(["deferred"])
    expect(await t.ledger.deferralOf(second.claimId)).toMatchObject({
      attempts: 2,
      firstDeferredAt: NOW,
      nextAttemptAt: at(60_000 + 120_000),
    })
    await t.ledger.claim("o", [], at(60_000), [second])
    const third = await pickUp(t, "a.json", at(180_000))
    expect(await t.commit("o", [accepted(third, "m-a")], at(180_000), () => "ok", policy)).toEqual(["processed"])
    expect(await t.ledger.deferralsAt(["a.json"])).toEqual(new Map())
    expect(await t.ledger.deferralCounts(at(180_000))).toEqual({ deferred: 0, due: 0 })
    expect(await t.ledger.resultOf("m-a")).toBe("ok")
  })

  it("sends a delivery still failing transiently past the policy's maximum age to error/ as expired", async () => {
    await using t = await b.open()
    await deferred(t, "a.json", "m-a")
    const late = at(policy.maxAgeMs)
    const again = await pickUp(t, "a.json", late)
    expect(await t.commit("o", [accepted(again, "m-a")], late, down, policy)).toEqual(["expired"])
    expect(await t.ledger.deferralsAt(["a.json"])).toEqual(new Map())
    const [failure] = (await t.ledger.history({ files: ["a.json"] })).failures
    expect(failure).toMatchObject({ reason: "expired", file: "a.json" })
    expect(failure?.detail).toContain(`after 2 attempts since ${NOW}: the bank is down`)
    expect((await t.ledger.listClaims()).map((r) => r.dest)).toEqual(["error"])
  })

  it("gives a first deferral a name no other deferred file has", async () => {
    await using t = await b.open()
    await deferred(t, "a.json", "m-1")
    const c = await deferred(t, "a.json", "m-2")
    expect(await t.ledger.deferralOf(c.claimId)).toMatchObject({ file: "a~1.json", msgId: "m-2" })
    expect([...(await t.ledger.deferralsAt(["a.json", "a~1.json"])).keys()]).toEqual(["a.json", "a~1.json"])
  })

  it("renames a deferral to the name its file got, and drops a picked-up one whose file was gone with its claim", async () => {
    await using t = await b.open()
    const c = await deferred(t, "a.json", "m-a")
    await t.ledger.renameDeferral(c.claimId, "a~2.json")
    expect([...(await t.ledger.deferralsAt(["a.json", "a~2.json"])).keys()]).toEqual(["a~2.json"])
    const picked = await pickUp(t, "a~2.json", at(60_000))
    await t.ledger.dropDeferral(picked, "o")
    expect(await t.ledger.deferralsAt(["a~2.json"])).toEqual(new Map())
    expect(await t.ledger.holdsClaim(picked.name, picked.claimId, "o")).toBe(false)
    expect(await t.ledger.listClaims()).toEqual([])
  })
}
