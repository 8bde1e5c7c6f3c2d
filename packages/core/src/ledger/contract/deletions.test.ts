// The contract's deletions: an operator throws a file away from error/ or deferred/, and the
// ledger stops counting it in the same transaction as the unlink.
import { expect, it } from "bun:test"
import { TransientError } from "../../transient.ts"
import { accepted, claimAll, fail, LATER, type LedgerBackend, NOW } from "./fixture.test.ts"

const policy = { firstMs: 60_000, maxMs: 3_600_000, maxAgeMs: 86_400_000 }
const due = new Date(Date.parse(NOW) + 60_000).toISOString()
const down = () => {
  throw new TransientError("the bank is down")
}

export function deletions(b: LedgerBackend): void {
  it("closes every open failure of a deleted file in error/: no reason, not open in stats, logged", async () => {
    await using t = await b.open()
    // Two failures under one name: the first file was removed by hand, a later one took its name.
    await fail(t.ledger, [
      ["bad.json", "parse"],
      ["keep.json", "missing-field"],
    ])
    await fail(t.ledger, [["bad.json", "parse"]])
    const removed: string[] = []
    const r = await t.ledger.recordDeletion("bad.json", "error", LATER, () => removed.push("bad.json"))
    expect(r).toEqual({ kind: "deleted", reason: "parse" })
    expect(removed).toEqual(["bad.json"])
    expect(await t.ledger.failureReasons()).toEqual(new Map([["keep.json", "missing-field"]]))
    expect(await t.ledger.unreplayedFailure("bad.json")).toBeUndefined()
    expect((await t.ledger.stats(new Date(NOW))).openFailures).toEqual({ "missing-field": 1 })
    expect(await t.rows("SELECT file, dir, deleted_at FROM deletions")).toEqual([
      { file: "bad.json", dir: "error", deleted_at: LATER },
    ])
  })

  it("lets retention forget a deleted failure and its deletion record as it forgets a replayed one, and keeps an open one", async () => {
    await using t = await b.open()
    await fail(t.ledger, [
      ["gone.json", "parse"],
      ["open.json", "parse"],
      ["late.json", "parse"],
    ])
    await t.ledger.recordDeletion("gone.json", "error", NOW, () => {})
    await t.ledger.recordDeletion("late.json", "error", LATER, () => {})
    expect(await t.ledger.compact(LATER, undefined, LATER)).toMatchObject({ failures: 1, deletions: 1 })
    expect(await t.rows("SELECT file FROM failures ORDER BY file")).toEqual([
      { file: "late.json" },
      { file: "open.json" },
    ])
    expect(await t.rows("SELECT file FROM deletions")).toEqual([{ file: "late.json" }])
  })

  it("records nothing when the unlink throws: the failure stays open", async () => {
    await using t = await b.open()
    await fail(t.ledger, [["bad.json", "parse"]])
    const gone = new Error("gone")
    const attempt = Promise.resolve().then(() =>
      t.ledger.recordDeletion("bad.json", "error", LATER, () => {
        throw gone
      }),
    )
    await expect(attempt).rejects.toThrow("gone")
    expect(await t.ledger.failureReasons()).toEqual(new Map([["bad.json", "parse"]]))
    expect(await t.rows("SELECT file FROM deletions")).toEqual([])
  })

  it("forgets a deleted deferred file's row, so it is never due, and refuses one a consumer is picking up", async () => {
    await using t = await b.open()
    const [a, p] = await claimAll(t.ledger, "o", ["a.json", "p.json"])
    if (!a || !p) throw new Error("no claim")
    expect(await t.commit("o", [accepted(a, "m-a"), accepted(p, "m-p")], NOW, down, policy)).toEqual([
      "deferred",
      "deferred",
    ])
    await t.ledger.claim("o", [], NOW, [a, p])
    const picking = (await t.ledger.dueDeferrals(due, 10)).filter((d) => d.file === "p.json")
    expect(await t.ledger.claimDue("o", picking, due)).toHaveLength(1)
    const removed: string[] = []
    expect(await t.ledger.recordDeletion("p.json", "deferred", due, () => removed.push("p.json"))).toEqual({
      kind: "in-use",
    })
    expect(await t.ledger.recordDeletion("a.json", "deferred", due, () => removed.push("a.json"))).toEqual({
      kind: "deleted",
      msgId: "m-a",
    })
    expect(removed).toEqual(["a.json"])
    expect((await t.ledger.dueDeferrals(due, 10)).map((d) => d.file)).toEqual(["p.json"])
    expect(await t.ledger.deferralsAt(["a.json"])).toEqual(new Map())
    expect(await t.ledger.deferralCounts(due)).toEqual({ deferred: 1, due: 1 })
    expect(await t.rows("SELECT file, dir, msg_id FROM deletions")).toEqual([
      { file: "a.json", dir: "deferred", msg_id: "m-a" },
    ])
    // Nothing of a.json blocks a new delivery under its name.
    expect((await claimAll(t.ledger, "o", ["a.json"])).map((c) => c.name)).toEqual(["a.json"])
  })
}
