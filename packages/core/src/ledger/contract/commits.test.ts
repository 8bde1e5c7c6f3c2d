// The contract's commit: the verdict each outcome gets (ledger-verdicts.ts), the rows each
// verdict writes, the effect run with the first delivery only, and the fence.
import { expect, it } from "bun:test"
import type { Claim } from "../model.ts"
import { accepted, claimAll, FAR, type LedgerBackend, NOW, rejected, vanished } from "./fixture.test.ts"

export function commits(b: LedgerBackend): void {
  it("decides every kind of outcome in one batch, the first delivery of a msg_id winning in batch order", async () => {
    await using t = await b.open()
    const [p, dup, conflict, bad, gone] = await claimAll(t.ledger, "a", [
      "p.json",
      "dup.json",
      "c.json",
      "bad.json",
      "v.json",
    ])
    const [other] = await claimAll(t.ledger, "b", ["other.json"])
    const batch = [
      accepted(p as Claim, "m-1"),
      accepted(dup as Claim, "m-1"),
      accepted(conflict as Claim, "m-1", { contentHash: "c-other" }),
      rejected(bad as Claim, "missing-field", { detail: "why bad.json", destName: "bad~1.json" }),
      vanished(gone as Claim),
      accepted(other as Claim, "m-2"),
    ]
    expect(await t.commit("a", batch, NOW)).toEqual([
      "processed",
      "duplicate",
      "conflict",
      "rejected",
      "vanished",
      "lost",
    ])
    expect(await t.rows("SELECT msg_id, file, amount FROM processed")).toEqual([
      { msg_id: "m-1", file: "p.json", amount: "1.10" },
    ])
    const h = await t.ledger.history({ msgIds: ["m-1", "m-2"], files: ["bad.json"] })
    expect(h.duplicates.map((d) => [d.msgId, d.file, d.isConflict])).toEqual([
      ["m-1", "dup.json", false],
      ["m-1", "c.json", true],
    ])
    expect(h.failures.map((f) => [f.file, f.original, f.reason, f.detail])).toEqual([
      ["bad~1.json", "bad.json", "missing-field", "why bad.json"],
    ])
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.ownerId, r.state, r.dest, r.destName])).toEqual([
      ["p.json", "a", "committed", "done", null],
      ["dup.json", "a", "committed", "done", null],
      ["c.json", "a", "committed", "done", null],
      ["bad.json", "a", "committed", "error", "bad~1.json"],
      ["other.json", "b", "claimed", null, null],
    ])
    // The effect ran once, for the first delivery only, inside the commit.
    expect(await t.rows("SELECT msg_id FROM applied")).toEqual([{ msg_id: "m-1" }])
    expect(await t.ledger.failureReason("bad~1.json")).toBe("missing-field")
  })

  it("rolls back only the delivery whose effect throws, sends it to error/ as handler and commits the rest", async () => {
    await using t = await b.open()
    const claims = await claimAll(t.ledger, "o", ["1.json", "2.json", "3.json"])
    const outcomes = claims.map((c, i) => accepted(c, `m${i + 1}`))
    const verdicts = await t.commit("o", outcomes, NOW, (o) => {
      if (o.msgId === "m2") throw new Error("effect failed")
    })
    expect(verdicts).toEqual(["processed", "handler-rejected", "processed"])
    expect(await t.rows("SELECT msg_id FROM applied ORDER BY msg_id")).toEqual([{ msg_id: "m1" }, { msg_id: "m3" }])
    expect(await t.rows("SELECT msg_id FROM processed ORDER BY msg_id")).toEqual([{ msg_id: "m1" }, { msg_id: "m3" }])
    const h = await t.ledger.history({ files: ["2.json"] })
    expect(h.failures.map((f) => [f.file, f.reason, f.detail])).toEqual([["2.json", "handler", "effect failed"]])
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.dest, r.destName])).toEqual([
      ["1.json", "done", null],
      ["2.json", "error", "2.json"],
      ["3.json", "done", null],
    ])
  })

  it("frees the key of a delivery whose effect threw for the next delivery of the msg_id in the batch", async () => {
    await using t = await b.open()
    const [first, second, third] = await claimAll(t.ledger, "a", ["x-1.json", "x-2.json", "x-3.json"])
    const batch = [
      accepted(first as Claim, "m-x"),
      accepted(second as Claim, "m-x"),
      accepted(third as Claim, "m-x", { contentHash: "c-other" }),
    ]
    const verdicts = await t.commit("a", batch, NOW, (o) => {
      if (o.name === "x-1.json") throw new Error("refused x-1.json")
    })
    expect(verdicts).toEqual(["handler-rejected", "processed", "conflict"])
    expect(await t.rows("SELECT file FROM processed")).toEqual([{ file: "x-2.json" }])
    expect(await t.rows("SELECT msg_id FROM applied")).toEqual([{ msg_id: "m-x" }])
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.dest])).toEqual([
      ["x-1.json", "error"],
      ["x-2.json", "done"],
      ["x-3.json", "done"],
    ])
  })

  it("rejects every delivery of a msg_id whose effect throws each time, and commits the rest", async () => {
    await using t = await b.open()
    const [a1, a2, bb] = await claimAll(t.ledger, "a", ["a-1.json", "a-2.json", "b.json"])
    const batch = [accepted(a1 as Claim, "m-a"), accepted(a2 as Claim, "m-a"), accepted(bb as Claim, "m-b")]
    const verdicts = await t.commit("a", batch, NOW, (o) => {
      if (o.msgId === "m-a") throw new Error(`refused ${o.name}`)
    })
    expect(verdicts).toEqual(["handler-rejected", "handler-rejected", "processed"])
    expect((await t.ledger.history({ files: ["a-1.json", "a-2.json"] })).failures.map((f) => f.file)).toEqual([
      "a-1.json",
      "a-2.json",
    ])
    expect(await t.rows("SELECT msg_id FROM applied")).toEqual([{ msg_id: "m-b" }])
  })

  it("stores a detail carrying U+0000 or a lone surrogate as escapes, and commits the rest of the batch", async () => {
    await using t = await b.open()
    const [a, bb, c] = await claimAll(t.ledger, "o", ["a.json", "b.json", "c.json"])
    if (!a || !bb || !c) throw new Error("no claim")
    const batch = [rejected(a, "parse", { detail: "token '\0' and \ud800" }), accepted(bb, "m-b"), accepted(c, "m-c")]
    const verdicts = await t.commit("o", batch, NOW, (o) => {
      if (o.msgId === "m-b") throw new Error("refused \udfff\0")
    })
    expect(verdicts).toEqual(["rejected", "handler-rejected", "processed"])
    const h = await t.ledger.history({ files: ["a.json", "b.json"] })
    expect(h.failures.map((f) => [f.file, f.reason, f.detail])).toEqual([
      ["a.json", "parse", "token '\\u0000' and \\ud800"],
      ["b.json", "handler", "refused \\udfff\\u0000"],
    ])
    expect(await t.rows("SELECT msg_id FROM processed")).toEqual([{ msg_id: "m-c" }])
  })

  it("fences each outcome by its claim's owner: a taken-over claim records nothing, a vanished one ends", async () => {
    await using t = await b.open()
    const [a, bb, c, d] = await claimAll(t.ledger, "o", ["a.json", "b.json", "c.json", "d.json"])
    if (!a || !bb || !c || !d) throw new Error("no claim")
    // Another consumer adopts a.json and b.json (o's lease ran out) and finishes a.json.
    const listed = (await t.ledger.listClaims()).filter((r) => r.name === "a.json" || r.name === "b.json")
    expect((await t.ledger.adoptClaims(listed, "other")).map((r) => r.name)).toEqual(["a.json", "b.json"])
    expect(await t.ledger.commit("other", [accepted(a, "m-a")], NOW)).toEqual(["processed"])
    const batch = [accepted(a, "m-a"), rejected(bb), accepted(c, "m-c"), vanished(d)]
    expect(await t.commit("o", batch, NOW)).toEqual(["lost", "lost", "processed", "vanished"])
    const h = await t.ledger.history({ msgIds: ["m-a", "m-c"], files: ["a.json", "b.json", "c.json", "d.json"] })
    expect(h.processed.map((p) => [p.msgId, p.claimId])).toEqual([
      ["m-a", a.claimId],
      ["m-c", c.claimId],
    ])
    expect([h.duplicates, h.failures]).toEqual([[], []])
    expect(await t.rows("SELECT msg_id FROM applied")).toEqual([{ msg_id: "m-c" }])
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.ownerId, r.state])).toEqual([
      ["a.json", "other", "committed"],
      ["b.json", "other", "claimed"],
      ["c.json", "o", "committed"],
    ])
  })

  it("keeps what the effect returned for resultOf, and fails a delivery whose result JSON cannot hold", async () => {
    await using t = await b.open()
    const [a, again, none, bad] = await claimAll(t.ledger, "o", ["a.json", "again.json", "none.json", "bad.json"])
    if (!a || !again || !none || !bad) throw new Error("no claim")
    const batch = [accepted(a, "m-a"), accepted(again, "m-a"), accepted(none, "m-none"), accepted(bad, "m-bad")]
    const results: Record<string, unknown> = { "m-a": { balance: "3.30", n: [1, 2] }, "m-bad": 10n }
    expect(await t.commit("o", batch, NOW, (o) => results[o.msgId])).toEqual([
      "processed",
      "duplicate",
      "processed",
      "handler-rejected",
    ])
    expect(await t.ledger.resultOf("m-a")).toEqual({ balance: "3.30", n: [1, 2] })
    expect((await t.ledger.history({ msgIds: ["m-a"] })).processed.map((p) => p.result)).toEqual([
      { balance: "3.30", n: [1, 2] },
    ])
    expect(await t.ledger.resultOf("m-none")).toBeUndefined()
    expect(await t.ledger.resultOf("m-bad")).toBeUndefined()
    expect(await t.ledger.resultOf("never")).toBeUndefined()
    expect(await t.ledger.failureReason("bad.json")).toBe("handler")
  })

  it("refuses an unknown msg_id at or below its order's pruned seq, and takes one above it", async () => {
    await using t = await b.open()
    const [old] = await claimAll(t.ledger, "a", ["old.json"])
    expect(await t.commit("a", [accepted(old as Claim, "m-old", { seq: 5 })], NOW)).toEqual(["processed"])
    await t.ledger.compact(FAR, FAR, NOW)
    const [below, at, above, again] = await claimAll(t.ledger, "a", [
      "below.json",
      "at.json",
      "above.json",
      "again.json",
    ])
    const batch = [
      accepted(below as Claim, "m-below", { seq: 3 }),
      accepted(at as Claim, "m-at", { seq: 5 }),
      accepted(above as Claim, "m-above", { seq: 6 }),
      accepted(again as Claim, "m-above", { seq: 6 }),
    ]
    expect(await t.commit("a", batch, NOW)).toEqual(["beyond-horizon", "beyond-horizon", "processed", "duplicate"])
    const h = await t.ledger.history({ files: ["below.json", "at.json"] })
    expect(h.failures.map((f) => [f.file, f.reason])).toEqual([
      ["below.json", "beyond-horizon"],
      ["at.json", "beyond-horizon"],
    ])
    expect(h.failures[0]?.detail).toContain("seq 3 <= 5")
    expect((await t.ledger.listClaims()).map((r) => [r.name, r.dest])).toEqual([
      ["old.json", "done"],
      ["below.json", "error"],
      ["at.json", "error"],
      ["above.json", "done"],
      ["again.json", "done"],
    ])
    expect(await t.rows("SELECT msg_id FROM applied")).toEqual([{ msg_id: "m-old" }, { msg_id: "m-above" }])
  })

  it("keeps each order's highest pruned seq in the horizon across compactions, never lowering it", async () => {
    await using t = await b.open()
    const [high, low] = await claimAll(t.ledger, "a", ["high.json", "low.json"])
    await t.commit("a", [accepted(high as Claim, "m-high", { seq: 7 })], "2026-01-01T00:00:00.000Z")
    await t.commit("a", [accepted(low as Claim, "m-low", { seq: 2 })], "2026-01-03T00:00:00.000Z")
    const summary = { duplicates: 0, failures: 0, replays: 0, deletions: 0, origins: 0, keys: 1 }
    expect(await t.ledger.compact(FAR, "2026-01-02T00:00:00.000Z", NOW)).toEqual(summary)
    expect(await t.ledger.compact(FAR, FAR, NOW)).toEqual(summary)
    expect(
      await t.rows(
        "SELECT order_no, CAST(max_seq AS INTEGER) AS max_seq, CAST(pruned AS INTEGER) AS pruned FROM horizon",
      ),
    ).toEqual([{ order_no: "A-1", max_seq: 7, pruned: 2 }])
  })
}
