import { describe, expect, it } from "bun:test"
import type { AcceptedOutcome } from "./ledger/model.ts"
import { Judgement } from "./ledger/verdicts.ts"
import { backoffMs, defaultDeferPolicy, deferPolicyOf, isTransient, TransientError } from "./transient.ts"

const policy = { firstMs: 100, maxMs: 350, maxAgeMs: 1000 }
const outcome: AcceptedOutcome = {
  kind: "accepted",
  name: "a.json",
  claimId: "c1",
  msgId: "m",
  orderNo: "O",
  seq: 1,
  amount: "1",
  hash: "h",
  contentHash: "ch",
  message: {},
}

describe("the deferral policy", () => {
  it("defaults to a first delay of 5 minutes, a cap of 1 hour and a maximum age of 5 days", () => {
    expect(defaultDeferPolicy).toEqual({ firstMs: 300_000, maxMs: 3_600_000, maxAgeMs: 432_000_000 })
  })

  it.each([
    [1, 100],
    [2, 200],
    [3, 350],
    [40, 350],
  ])("waits, after %i transient failures, %i ms (doubling, capped)", (attempts, ms) => {
    expect(backoffMs(policy, attempts)).toBe(ms)
  })

  it("waits at least the error's retryAfterMs, within the cap", () => {
    expect(backoffMs(policy, 1, 250)).toBe(250)
    expect(backoffMs(policy, 1, 10_000)).toBe(350)
    expect(backoffMs(policy, 1, Number.POSITIVE_INFINITY)).toBe(350)
  })

  it("takes a retryAfterMs that is not a number above 0 as asking for nothing", () => {
    // NaN is what Number() makes of a Retry-After header that holds a date.
    for (const asked of [Number.NaN, -5, 0, "5000", null]) expect(backoffMs(policy, 2, asked)).toBe(200)
  })

  it("refuses a policy no deferral could run with, naming the field", () => {
    expect(deferPolicyOf(undefined, "x")).toEqual(defaultDeferPolicy)
    expect(deferPolicyOf({ maxAgeMs: 0, maxMs: Number.POSITIVE_INFINITY }, "x")).toMatchObject({ maxAgeMs: 0 })
    expect(deferPolicyOf({ firstMs: 0 }, "x")).toMatchObject({ firstMs: 0 })
    for (const [defer, said] of [
      [{ firstMs: -1 }, "x: defer.firstMs must be a finite number of milliseconds, 0 or more (was -1)"],
      [{ firstMs: Number.NaN }, "(was NaN)"],
      [{ firstMs: Number.POSITIVE_INFINITY }, "(was Infinity)"],
      [{ firstMs: "5m" }, '(was "5m")'],
      [{ maxMs: -1 }, "defer.maxMs must be a number of milliseconds, 0 or more"],
      [{ maxAgeMs: Number.NaN }, "defer.maxAgeMs must be a number of milliseconds, 0 or more"],
    ] as const)
      expect(() => deferPolicyOf(defer as never, "x")).toThrow(said)
  })

  it("tells a TransientError, and a subclass, from any other error", () => {
    class DownstreamDown extends TransientError {}
    expect(isTransient(new TransientError("x"))).toBe(true)
    expect(isTransient(new DownstreamDown("x"))).toBe(true)
    expect(isTransient(new Error("x"))).toBe(false)
    expect(isTransient("TransientError")).toBe(false)
  })
})

describe("the deferral verdict", () => {
  const at = "2030-01-01T00:00:00.000Z"

  it("defers a first transient failure, its next attempt one first delay later", () => {
    const j = new Judgement([outcome], at, policy)
    j.effectFailed(outcome, new TransientError("down"))
    expect(j.verdicts()).toEqual(["deferred"])
    expect(j.deferrals).toMatchObject([
      { attempts: 1, firstDeferredAt: at, nextAttemptAt: "2030-01-01T00:00:00.100Z", lastError: "down" },
    ])
    expect(j.failures).toEqual([])
    expect(j.closed()).toEqual([])
  })

  it("carries the attempts and the first time of the row the claim picked up", () => {
    const j = new Judgement([outcome], at, policy)
    j.effectFailed(outcome, new TransientError("down"), { attempts: 2, firstDeferredAt: "2029-12-31T23:59:59.500Z" })
    expect(j.deferrals).toMatchObject([
      { attempts: 3, firstDeferredAt: "2029-12-31T23:59:59.500Z", nextAttemptAt: "2030-01-01T00:00:00.350Z" },
    ])
  })

  it("expires a transient failure at the maximum age: a failures row, the claim to error/", () => {
    const j = new Judgement([outcome], at, policy)
    j.effectFailed(outcome, new TransientError("still down"), {
      attempts: 5,
      firstDeferredAt: "2029-12-31T23:59:59.000Z",
    })
    expect(j.verdicts()).toEqual(["expired"])
    expect(j.failures).toMatchObject([{ reason: "expired", file: "a.json" }])
    expect(j.failures[0]?.detail).toContain("still down")
    expect(j.redirected()).toEqual([outcome])
    expect(j.closed()).toEqual(["c1"])
  })

  it("keeps any other error a permanent handler failure", () => {
    const j = new Judgement([outcome], at, policy)
    j.effectFailed(outcome, new Error("no"))
    expect(j.verdicts()).toEqual(["handler-rejected"])
    expect(j.deferrals).toEqual([])
  })
})
