// The contract's failures and replays: what error/ holds by the ledger, what replay decides by,
// and the replay's own half in the ledger.
import { expect, it } from "bun:test"
import { SpoolError } from "../../errors.ts"
import type { FailureRecord } from "../model.ts"
import { claimAll, fail, LATER, type LedgerBackend, NOW, rejected } from "./fixture.test.ts"

export function failures(b: LedgerBackend): void {
  it("gives the reason of each file's latest failure not replayed yet", async () => {
    await using t = await b.open()
    await fail(t.ledger, [
      ["a.json", "parse"],
      ["b.json", "missing-field"],
    ])
    await t.ledger.markReplayed("b.json", NOW)
    await fail(t.ledger, [["a.json", "invalid-field"]])
    expect(await t.ledger.failureReasons()).toEqual(new Map([["a.json", "invalid-field"]]))
    expect(await t.ledger.failureReason("a.json")).toBe("invalid-field")
    expect(await t.ledger.failureReason("b.json")).toBeUndefined()
  })

  it("gives the latest unreplayed failure of files with its hash and time, one or many at a time, none once replayed", async () => {
    await using t = await b.open()
    const hash = "ab".repeat(32)
    await fail(t.ledger, [["a.json", "parse", "cd".repeat(32)]])
    await t.ledger.markReplayed("a.json", NOW)
    await fail(t.ledger, [
      ["a.json", "missing-field", hash],
      ["big.json", "too-large"],
    ])
    const a: FailureRecord = { reason: "missing-field", payloadHash: hash, failedAt: NOW }
    const big: FailureRecord = { reason: "too-large", payloadHash: null, failedAt: NOW }
    expect(await t.ledger.unreplayedFailure("a.json")).toEqual(a)
    expect(await t.ledger.unreplayedFailure("big.json")).toEqual(big)
    expect(await t.ledger.unreplayedFailures(["big.json", "never.json", "a.json"])).toEqual(
      new Map([
        ["big.json", big],
        ["a.json", a],
      ]),
    )
    expect(await t.ledger.unreplayedFailures([])).toEqual(new Map())
    await t.ledger.markReplayed("a.json", LATER)
    expect(await t.ledger.unreplayedFailure("a.json")).toBeUndefined()
    expect(await t.ledger.unreplayedFailure("never.json")).toBeUndefined()
  })

  it("marks the latest failure of a file replayed once, and logs every replay", async () => {
    await using t = await b.open()
    await fail(t.ledger, [["bad.json", "parse"]])
    expect(await t.ledger.markReplayed("bad.json", NOW)).toBe(true)
    expect(await t.ledger.failureReason("bad.json")).toBeUndefined()
    expect(await t.ledger.markReplayed("bad.json", LATER)).toBe(false)
    expect(await t.ledger.markReplayed("never.json", LATER)).toBe(false)
    const h = await t.ledger.history({ files: ["bad.json", "never.json"] })
    const [failure] = h.failures
    expect(h.failures.map((f) => [f.file, f.replayedAt])).toEqual([["bad.json", NOW]])
    expect(h.replays).toEqual([
      { file: "bad.json", failureId: failure?.id ?? -1, replayedAt: NOW },
      { file: "bad.json", failureId: null, replayedAt: LATER },
      { file: "never.json", failureId: null, replayedAt: LATER },
    ])
    expect(await t.ledger.replayCount("bad.json")).toBe(2)
  })

  it("follows a failure renamed at move time", async () => {
    await using t = await b.open()
    const [c] = await claimAll(t.ledger, "o", ["bad.json"])
    if (!c) throw new Error("no claim")
    await t.ledger.commit("o", [rejected(c)], NOW)
    await t.ledger.renameFailure(c.claimId, "bad~1.json")
    expect(await t.ledger.failureReason("bad.json")).toBeUndefined()
    expect(await t.ledger.failureReason("bad~1.json")).toBe("parse")
    expect(await t.ledger.markReplayed("bad~1.json", NOW)).toBe(true)
  })

  it("records a replay: the failure marked, the replay logged, then the move", async () => {
    await using t = await b.open()
    await fail(t.ledger, [["a.json", "parse"]])
    const seen: string[] = []
    const r = await t.ledger.recordReplay("a.json", LATER, () => seen.push("moved"), 1)
    expect(r).toEqual({ kind: "replayed", isRecordMarked: true })
    expect(seen).toEqual(["moved"])
    expect(await t.ledger.failureReasons()).toEqual(new Map())
    expect(await t.ledger.replayCount("a.json")).toBe(1)
    // No failure record under the name: the replay is still logged.
    expect(await t.ledger.recordReplay("never.json", LATER, () => {})).toEqual({
      kind: "replayed",
      isRecordMarked: false,
    })
    expect(await t.ledger.replayCount("never.json")).toBe(1)
  })

  it("refuses a replay at the limit without writing or moving anything", async () => {
    await using t = await b.open()
    await fail(t.ledger, [["a.json", "parse"]])
    await t.ledger.markReplayed("a.json", NOW)
    await fail(t.ledger, [["a.json", "parse"]])
    const r = await t.ledger.recordReplay(
      "a.json",
      LATER,
      () => {
        throw new Error("moved past the limit")
      },
      1,
    )
    expect(r).toEqual({ kind: "too-often", count: 1 })
    expect(await t.ledger.replayCount("a.json")).toBe(1)
    expect(await t.ledger.failureReason("a.json")).toBe("parse")
  })

  it("rolls the mark back when the move throws", async () => {
    await using t = await b.open()
    await fail(t.ledger, [["a.json", "parse"]])
    const refusal = new SpoolError("refused", "a file of that name just appeared in inbox/")
    // Thrown or rejected, as each adapter runs it: synchronously on SQLite.
    const replay = async () =>
      t.ledger.recordReplay("a.json", LATER, () => {
        throw refusal
      })
    await expect(replay()).rejects.toBe(refusal)
    expect(await t.ledger.replayCount("a.json")).toBe(0)
    expect(await t.ledger.failureReasons()).toEqual(new Map([["a.json", "parse"]]))
    // The ledger is usable after it: the rollback ended the transaction.
    expect(await t.ledger.recordReplay("a.json", LATER, () => {})).toEqual({ kind: "replayed", isRecordMarked: true })
  })
}
