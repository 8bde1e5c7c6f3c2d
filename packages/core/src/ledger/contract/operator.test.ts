// The contract's operator queries: what show, the reports, stats, order-check, compact and
// verify read from a ledger.
import { expect, it } from "bun:test"
import { SpoolError } from "../../errors.ts"
import type { Claim } from "../model.ts"
import { accepted, all, claimAll, FAR, fail, LATER, type LedgerBackend, NOW, owner } from "./fixture.test.ts"

export function operator(b: LedgerBackend): void {
  it("tells the story of messages and files by msg_id, file name or payload hash, each list in write order", async () => {
    await using t = await b.open()
    const [a, dup, c] = await claimAll(t.ledger, "o", ["a.json", "dup.json", "c.json"])
    if (!a || !dup || !c) throw new Error("no claim")
    await t.commit("o", [accepted(a, "m-a"), accepted(dup, "m-a"), accepted(c, "m-c")], NOW, () => ({ ok: 1 }))
    await fail(t.ledger, [["bad.json", "parse", "ff".repeat(32)]], LATER)
    await t.ledger.markReplayed("bad.json", LATER)
    const byId = await t.ledger.history({ msgIds: ["m-a"] })
    expect(byId.processed).toEqual([
      {
        msgId: "m-a",
        file: "a.json",
        processedAt: NOW,
        claimId: a.claimId,
        payloadHash: "bytes-a.json",
        contentHash: "c-m-a",
        result: { ok: 1 },
      },
    ])
    expect(byId.duplicates).toEqual([
      {
        msgId: "m-a",
        file: "dup.json",
        seenAt: NOW,
        isConflict: false,
        claimId: dup.claimId,
        payloadHash: "bytes-dup.json",
        contentHash: "c-m-a",
      },
    ])
    expect([byId.failures, byId.replays, byId.claims]).toEqual([[], [], []])
    const byHash = await t.ledger.history({ payloadHashes: ["ff".repeat(32), "bytes-c.json"] })
    expect(byHash.processed.map((p) => p.file)).toEqual(["c.json"])
    expect(byHash.failures.map((f) => [f.file, f.reason, f.failedAt, f.replayedAt])).toEqual([
      ["bad.json", "parse", LATER, LATER],
    ])
    expect(byHash.replays.map((r) => r.file)).toEqual(["bad.json"])
    const byFile = await t.ledger.history({ files: ["c.json"] })
    expect(byFile.processed.map((p) => p.msgId)).toEqual(["m-c"])
    expect(byFile.claims.map((r) => [r.name, r.state, r.dest, r.claimedAt])).toEqual([
      ["c.json", "committed", "done", NOW],
    ])
    expect(await t.ledger.history({})).toEqual({ processed: [], duplicates: [], failures: [], replays: [], claims: [] })
  })

  it("lists the distinct msg_ids seen as duplicates, ascending by code point", async () => {
    await using t = await b.open()
    const ids = ["m-b", "m-b", "m-a", "m-a", "m-b", "m-c", "M-z", "M-z"]
    const claims = await claimAll(
      t.ledger,
      "o",
      ids.map((_, i) => `${i}.json`),
    )
    await t.ledger.commit(
      "o",
      claims.map((c, i) => accepted(c, ids[i] ?? "")),
      NOW,
    )
    expect(await all(t.ledger.duplicateIds())).toEqual(["M-z", "m-a", "m-b"])
  })

  it("lists each conflicting redelivery beside the delivery that was processed", async () => {
    await using t = await b.open()
    const [p, same, other, q, otherQ] = await claimAll(t.ledger, "o", [
      "p.json",
      "s.json",
      "x.json",
      "q.json",
      "y.json",
    ])
    const batch = [
      accepted(p as Claim, "m-p"),
      accepted(same as Claim, "m-p"),
      accepted(other as Claim, "m-p", { contentHash: "c-x" }),
      accepted(q as Claim, "m-o"),
      accepted(otherQ as Claim, "m-o", { contentHash: "c-y" }),
    ]
    await t.ledger.commit("o", batch, NOW)
    expect(await all(t.ledger.conflicts())).toEqual([
      { msg_id: "m-o", file: "y.json", content_hash: "c-y", processed_file: "q.json", processed_content_hash: "c-m-o" },
      { msg_id: "m-p", file: "x.json", content_hash: "c-x", processed_file: "p.json", processed_content_hash: "c-m-p" },
    ])
  })

  it("counts all time and a window's statistics from its start", async () => {
    await using t = await b.open()
    const [a, dup, conflict] = await claimAll(t.ledger, "o", ["a.json", "d.json", "c.json"])
    const batch = [
      accepted(a as Claim, "m-a"),
      accepted(dup as Claim, "m-a"),
      accepted(conflict as Claim, "m-a", { contentHash: "x" }),
    ]
    await t.ledger.commit("o", batch, NOW)
    await fail(t.ledger, [
      ["bad.json", "parse"],
      ["p.json", "poison"],
    ])
    await t.ledger.recordReplay("bad.json", LATER, () => {})
    const whole = await t.ledger.stats(new Date("2026-11-29T09:00:00.000Z"))
    expect(whole.since).toBe("2026-11-29T09:00:00.000Z")
    expect(whole.allTime).toEqual({
      processed: 1,
      duplicates: 2,
      duplicateRate: 2 / 3,
      conflicts: 1,
      failures: 2,
      failuresByReason: { parse: 1, poison: 1 },
      poison: 1,
      replays: 1,
    })
    expect(whole.recent).toMatchObject({ processed: 1, failures: 2, replays: 1 })
    expect(whole).toMatchObject({ duplicateIds: 1, openFailures: { poison: 1 }, lastProcessedAt: NOW })
    const late = await t.ledger.stats(new Date("2026-11-29T10:30:00.000Z"))
    expect(late.recent).toMatchObject({ processed: 0, duplicates: 0, failures: 0, replays: 1, duplicateRate: null })
    expect((await t.ledger.stats(new Date("2026-11-29T11:30:00.000Z"))).recent).toMatchObject({ replays: 0 })
  })

  it("finds duplicated and missing seqs of each order, including a gap before the first", async () => {
    await using t = await b.open()
    const rows: [string, string, number][] = [
      ["x1", "X", 1],
      ["x2", "X", 2],
      ["x4", "X", 4],
      ["y1", "Y", 1],
      ["y1b", "Y", 1],
      ["z3", "Z", 3],
      ["ok1", "OK", 1],
    ]
    const claims = await claimAll(
      t.ledger,
      "o",
      rows.map(([m]) => `${m}.json`),
    )
    const batch = rows.map(([m, orderNo, seq], i) => accepted(claims[i] as Claim, m, { orderNo, seq }))
    await t.ledger.commit("o", batch, NOW)
    const problems = [
      { order_no: "X", seq: 3, problem: "missing" },
      { order_no: "Y", seq: 1, problem: "duplicate" },
      { order_no: "Z", seq: 1, problem: "missing" },
      { order_no: "Z", seq: 2, problem: "missing" },
    ] as const
    expect((await t.ledger.orderCheck(Number.POSITIVE_INFINITY)).problems).toEqual([...problems])
    // The same problems as ranges, with order-check.sql's rows while they are at most the rows asked for.
    const ranges = [
      { order_no: "X", first: 3, last: 3, problem: "missing" },
      { order_no: "Y", first: 1, last: 1, problem: "duplicate" },
      { order_no: "Z", first: 1, last: 2, problem: "missing" },
    ] as const
    expect(await t.ledger.orderCheck(4)).toEqual({ ranges: [...ranges], problems: [...problems] })
    expect(await t.ledger.orderCheck(3)).toEqual({ ranges: [...ranges] })
  })

  it("looks for an order's missing seqs above the highest one compact pruned, not from the first", async () => {
    await using t = await b.open()
    const [one, two] = await claimAll(t.ledger, "o", ["1.json", "2.json"])
    await t.ledger.commit(
      "o",
      [accepted(one as Claim, "h1", { orderNo: "H" }), accepted(two as Claim, "h2", { orderNo: "H", seq: 2 })],
      NOW,
    )
    await t.ledger.compact(FAR, LATER, LATER)
    const [four, six] = await claimAll(t.ledger, "o", ["4.json", "6.json"])
    const batch = [
      accepted(four as Claim, "h4", { orderNo: "H", seq: 4 }),
      accepted(six as Claim, "h6", { orderNo: "H", seq: 6 }),
    ]
    await t.ledger.commit("o", batch, LATER)
    expect((await t.ledger.orderCheck(Number.POSITIVE_INFINITY)).problems).toEqual([
      { order_no: "H", seq: 3, problem: "missing" },
      { order_no: "H", seq: 5, problem: "missing" },
    ])
  })

  it("forgets the history and the keys older than their cutoffs, never an open failure, and says how many", async () => {
    await using t = await b.open()
    const [old, oldDup, fresh, freshDup] = await claimAll(t.ledger, "o", ["o.json", "od.json", "f.json", "fd.json"])
    await t.ledger.commit("o", [accepted(old as Claim, "m-old"), accepted(oldDup as Claim, "m-old")], NOW)
    await t.ledger.commit("o", [accepted(fresh as Claim, "m-new"), accepted(freshDup as Claim, "m-new")], LATER)
    await fail(t.ledger, [
      ["replayed.json", "parse"],
      ["open.json", "parse"],
    ])
    await t.ledger.markReplayed("replayed.json", NOW)
    await t.ledger.markReplayed("later.json", LATER)
    expect(await t.ledger.compact("2026-11-29T10:30:00.000Z", undefined, LATER)).toEqual({
      duplicates: 1,
      failures: 1,
      replays: 1,
      deletions: 0,
      origins: 0,
      keys: 0,
    })
    expect(await t.ledger.failureReasons()).toEqual(new Map([["open.json", "parse"]]))
    expect(await t.ledger.replayCount("later.json")).toBe(1)
    expect(await all(t.ledger.duplicateIds())).toEqual(["m-new"])
    expect(await t.ledger.compact(FAR, "2026-11-29T10:30:00.000Z", LATER)).toEqual({
      duplicates: 1,
      failures: 0,
      replays: 1,
      deletions: 0,
      origins: 0,
      keys: 1,
    })
    expect(await t.rows("SELECT msg_id FROM processed")).toEqual([{ msg_id: "m-new" }])
    expect(await t.ledger.failureReasons()).toEqual(new Map([["open.json", "parse"]]))
  })

  it("verifies a consistent ledger, and finds a claim whose owner has no consumers row", async () => {
    await using t = await b.open()
    await t.ledger.registerConsumer(owner("o"), NOW)
    const [a] = await claimAll(t.ledger, "o", ["a.json"])
    await t.ledger.commit("o", [accepted(a as Claim, "m-a")], NOW)
    const healthy = await t.ledger.verify()
    expect(healthy.map((c) => c.name)).toEqual([
      "integrity",
      "duplicate-msg-id",
      "duplicate-claim",
      "claim-without-consumer",
    ])
    expect(healthy.filter((c) => c.status === "failed")).toEqual([])
    expect(healthy.slice(1).map((c) => c.status)).toEqual(["ok", "ok", "ok"])
    await t.ledger.claim("ghost", ["g.json"], NOW)
    const [, , , orphaned] = await t.ledger.verify()
    expect(orphaned).toMatchObject({ name: "claim-without-consumer", status: "failed", found: 1 })
    expect(orphaned?.problems[0]).toContain("'g.json' is claimed by 'ghost', which has no consumers row")
  })

  it("runs the report writer under its report lock and returns what it returns, or its failure", async () => {
    await using t = await b.open()
    await fail(t.ledger, [["a.json", "parse"]])
    expect(await t.ledger.withReportLock(async () => (await t.ledger.failureReasons()).get("a.json"))).toBe("parse")
    // As writeFileAtomic fails: the writer's own error, not one of the ledger's.
    const failure = new SpoolError("io", "cannot write ROOT/dup.txt (ENOSPC)")
    await expect(
      t.ledger.withReportLock(async () => {
        throw failure
      }),
    ).rejects.toBe(failure)
    // Released: the next writer gets the lock.
    expect(await t.ledger.withReportLock(async () => "again")).toBe("again")
  })
}
