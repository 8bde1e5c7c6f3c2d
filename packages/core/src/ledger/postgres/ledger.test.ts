import { afterAll, describe, expect, it } from "bun:test"
import { pgUnavailable, tempDatabase } from "@spool/test-support"
import { currentOwner } from "../../queue/owner.ts"
import type { Outcome } from "../model.ts"
import { PostgresLedger } from "./ledger.ts"

const skip = await pgUnavailable()
if (skip) console.warn(skip)
const pg = skip ? describe.skip : describe

const now = () => new Date().toISOString()
const accepted = (
  name: string,
  claimId: string,
  msgId: string,
  extra: Partial<Record<string, unknown>> = {},
): Outcome =>
  ({
    kind: "accepted",
    name,
    claimId,
    msgId,
    orderNo: "O-1",
    seq: 1,
    amount: "1.10",
    hash: `h-${name}`,
    contentHash: `c-${msgId}`,
    message: {},
    ...extra,
  }) as Outcome

pg("PostgresLedger", () => {
  const open: PostgresLedger[] = []
  afterAll(async () => {
    for (const l of open) await l.close().catch(() => {})
  })

  it("creates the schema once even when several consumers open a new ledger at the same moment", async () => {
    await using db = await tempDatabase()
    const ledgers = await Promise.all(Array.from({ length: 4 }, () => PostgresLedger.open(db.url, "root-a")))
    for (const l of ledgers) expect(await l.version()).toBe(5)
    const sql = (ledgers[0] as PostgresLedger).sql
    const rows = await sql`SELECT version FROM spool_schema ORDER BY version`
    expect(rows.map((r: { version: number }) => r.version)).toEqual([1, 2, 3, 4, 5])
    for (const l of ledgers) await l.close()
  })

  it("forgets only claimless consumers, and only of its own root", async () => {
    await using db = await tempDatabase()
    const a = await PostgresLedger.open(db.url, "root-a")
    const b = await PostgresLedger.open(db.url, "root-b")
    open.push(a, b)
    const [idle, holding, elsewhere] = [currentOwner(), currentOwner(), currentOwner()]
    await a.registerConsumer(idle, now())
    await a.registerConsumer(holding, now())
    await b.registerConsumer(elsewhere, now())
    await a.claim(holding.ownerId, ["a.json"], now())
    expect((await a.listConsumers()).map((o) => o.ownerId).sort()).toEqual([idle.ownerId, holding.ownerId].sort())
    expect(await b.listConsumers()).toEqual([elsewhere])
    await a.forgetConsumers([idle.ownerId, holding.ownerId, elsewhere.ownerId])
    expect((await a.listConsumers()).map((o) => o.ownerId)).toEqual([holding.ownerId])
    expect(await b.listConsumers()).toEqual([elsewhere])
  })

  it("gives each name of a root to one owner, but the same name in another root to another", async () => {
    await using db = await tempDatabase()
    const a = await PostgresLedger.open(db.url, "root-a")
    const a2 = await PostgresLedger.open(db.url, "root-a")
    const b = await PostgresLedger.open(db.url, "root-b")
    open.push(a, a2, b)
    const [x, y, z] = [currentOwner(), currentOwner(), currentOwner()]
    for (const [l, o] of [
      [a, x],
      [a2, y],
      [b, z],
    ] as const)
      await l.registerConsumer(o, now())
    const first = await a.claim(x.ownerId, ["m1.json", "m2.json"], now())
    const second = await a2.claim(y.ownerId, ["m2.json", "m3.json"], now())
    const other = await b.claim(z.ownerId, ["m1.json"], now())
    expect(first.map((c) => c.name)).toEqual(["m1.json", "m2.json"])
    expect(second.map((c) => c.name)).toEqual(["m3.json"])
    expect(other.map((c) => c.name)).toEqual(["m1.json"])
  })

  it("lists a batch's claims in the order they were claimed, not by name: recovery redoes them in it", async () => {
    await using db = await tempDatabase()
    const l = await PostgresLedger.open(db.url, "root-a")
    open.push(l)
    const o = currentOwner()
    await l.registerConsumer(o, now())
    const order = ["m-z.json", "m-b.json", "m-y.json", "m-a.json"]
    await l.claim(o.ownerId, order.slice(0, 2), now())
    await l.claim(o.ownerId, order.slice(2), now())
    expect((await l.listClaims()).map((c) => c.name)).toEqual(order)
  })

  it("returns processed, duplicate, conflict and rejected verdicts; the first delivery in a batch wins", async () => {
    await using db = await tempDatabase()
    const l = await PostgresLedger.open(db.url, "root-a")
    open.push(l)
    const o = currentOwner()
    await l.registerConsumer(o, now())
    const claims = await l.claim(o.ownerId, ["a.json", "b.json", "c.json", "d.json"], now())
    const id = (n: string) => claims.find((c) => c.name === n)?.claimId as string
    const verdicts = await l.commit(
      o.ownerId,
      [
        accepted("a.json", id("a.json"), "m-1"),
        accepted("b.json", id("b.json"), "m-1"),
        accepted("c.json", id("c.json"), "m-1", { contentHash: "different" }),
        {
          kind: "rejected",
          name: "d.json",
          claimId: id("d.json"),
          destName: "d.json",
          reason: "parse",
          detail: "x",
          hash: null,
        },
      ],
      now(),
    )
    expect(verdicts).toEqual(["processed", "duplicate", "conflict", "rejected"])
    const [p] = await l.sql`SELECT msg_id, file, amount FROM processed`
    expect(p).toEqual({ msg_id: "m-1", file: "a.json", amount: "1.10" })
    const ids: string[] = []
    for await (const m of l.duplicateIds()) ids.push(m)
    expect(ids).toEqual(["m-1"])
    expect(await l.failureReason("d.json")).toBe("parse")
    const claimsNow = await l.listClaims()
    expect(claimsNow.map((c) => [c.name, c.state, c.dest])).toEqual([
      ["a.json", "committed", "done"],
      ["b.json", "committed", "done"],
      ["c.json", "committed", "done"],
      ["d.json", "committed", "error"],
    ])
  })

  it("rolls back only the message whose effect throws", async () => {
    await using db = await tempDatabase()
    const l = await PostgresLedger.open(db.url, "root-a")
    open.push(l)
    await l.sql`CREATE TABLE effects (msg_id TEXT PRIMARY KEY)`
    const o = currentOwner()
    await l.registerConsumer(o, now())
    const claims = await l.claim(o.ownerId, ["a.json", "b.json"], now())
    const verdicts = await l.commit(
      o.ownerId,
      claims.map((c, i) => accepted(c.name, c.claimId, `m-${i}`)),
      now(),
      async (out, tx) => {
        await tx`INSERT INTO effects VALUES (${out.msgId})`
        if (out.msgId === "m-1") throw new Error("no")
      },
    )
    expect(verdicts).toEqual(["processed", "handler-rejected"])
    expect(await l.sql`SELECT msg_id FROM effects`).toEqual([{ msg_id: "m-0" }])
    expect(await l.sql`SELECT msg_id FROM processed`).toEqual([{ msg_id: "m-0" }])
    expect(await l.failureReason("b.json")).toBe("handler")
  })

  it("stores a detail carrying U+0000 or a lone surrogate as escapes, and commits the rest of the batch", async () => {
    await using db = await tempDatabase()
    const l = await PostgresLedger.open(db.url, "root-a")
    open.push(l)
    const o = currentOwner()
    await l.registerConsumer(o, now())
    const [a, b, c] = await l.claim(o.ownerId, ["a.json", "b.json", "c.json"], now())
    if (!a || !b || !c) throw new Error("not claimed")
    const verdicts = await l.commit(
      o.ownerId,
      [
        {
          kind: "rejected",
          name: "a.json",
          claimId: a.claimId,
          destName: "a.json",
          reason: "parse",
          detail: "token '\0' and \ud800",
          hash: null,
        },
        accepted("b.json", b.claimId, "m-b"),
        accepted("c.json", c.claimId, "m-c"),
      ],
      now(),
      (out) => {
        if (out.msgId === "m-b") throw new Error("refused \udfff\0")
      },
    )
    expect(verdicts).toEqual(["rejected", "handler-rejected", "processed"])
    expect(await l.sql`SELECT file, reason, detail FROM failures ORDER BY file`).toEqual([
      { file: "a.json", reason: "parse", detail: "token '\\u0000' and \\ud800" },
      { file: "b.json", reason: "handler", detail: "refused \\udfff\\u0000" },
    ])
    expect(await l.sql`SELECT msg_id FROM processed`).toEqual([{ msg_id: "m-c" }])
  })

  it("forgets at the next claim only the committed claims it is given, of this owner", async () => {
    await using db = await tempDatabase()
    const l = await PostgresLedger.open(db.url, "root-a")
    open.push(l)
    const [o, other] = [currentOwner(), { ...currentOwner(), ownerId: "other" }]
    await l.registerConsumer(o, now())
    await l.registerConsumer(other, now())
    const [a, b, c] = await l.claim(o.ownerId, ["a.json", "b.json", "c.json"], now())
    const [d] = await l.claim(other.ownerId, ["d.json"], now())
    if (!a || !b || !c || !d) throw new Error("no claim")
    await l.commit(o.ownerId, [accepted("a.json", a.claimId, "m-a"), accepted("b.json", b.claimId, "m-b")], now())
    await l.commit(other.ownerId, [accepted("d.json", d.claimId, "m-d")], now())
    // b's move may still be in flight, c is not committed, d is another owner's: only a goes.
    const again = await l.claim(o.ownerId, ["a.json", "b.json"], now(), [a, c, d])
    expect(again.map((x) => x.name)).toEqual(["a.json"])
    const rows = await l.sql`SELECT name, state, owner_id FROM claims ORDER BY name`
    expect(rows.map((r: { name: string; state: string }) => [r.name, r.state])).toEqual([
      ["a.json", "claimed"],
      ["b.json", "committed"],
      ["c.json", "claimed"],
      ["d.json", "committed"],
    ])
  })

  it("runs order-check.sql unchanged and finds gaps and duplicated seqs", async () => {
    await using db = await tempDatabase()
    const l = await PostgresLedger.open(db.url, "root-a")
    open.push(l)
    const o = currentOwner()
    await l.registerConsumer(o, now())
    const names = ["a", "b", "c", "d"].map((n) => `${n}.json`)
    const claims = await l.claim(o.ownerId, names, now())
    await l.commit(
      o.ownerId,
      [
        accepted("a.json", claims[0]?.claimId as string, "x1", { orderNo: "X", seq: 1 }),
        accepted("b.json", claims[1]?.claimId as string, "x4", { orderNo: "X", seq: 4 }),
        accepted("c.json", claims[2]?.claimId as string, "y1", { orderNo: "Y", seq: 1 }),
        accepted("d.json", claims[3]?.claimId as string, "y1b", { orderNo: "Y", seq: 1 }),
      ],
      now(),
    )
    expect(await l.orderProblems()).toEqual([
      { order_no: "X", seq: 2, problem: "missing" },
      { order_no: "X", seq: 3, problem: "missing" },
      { order_no: "Y", seq: 1, problem: "duplicate" },
    ])
  })

  it("says clearly when the server cannot be reached", async () => {
    await expect(PostgresLedger.open("postgres://postgres@127.0.0.1:1/none", "r")).rejects.toThrow(
      /cannot reach the PostgreSQL ledger at postgres:\/\/postgres@127.0.0.1:1\/none/,
    )
  })

  it("fences each outcome by its claim's owner: a taken-over claim records nothing, a vanished one ends", async () => {
    await using db = await tempDatabase()
    const l = await PostgresLedger.open(db.url, "root-a")
    open.push(l)
    const [o, other] = [currentOwner(), currentOwner()]
    await l.registerConsumer(o, now())
    await l.registerConsumer(other, now())
    const [a, b, c, d] = await l.claim(o.ownerId, ["a.json", "b.json", "c.json", "d.json"], now())
    if (!a || !b || !c || !d) throw new Error("no claim")
    const rows = (await l.listClaims()).filter((r) => r.name === "a.json" || r.name === "b.json")
    expect((await l.adoptClaims(rows, other.ownerId)).map((r) => r.name)).toEqual(["a.json", "b.json"])
    expect(await l.commit(other.ownerId, [accepted("a.json", a.claimId, "m-a")], now())).toEqual(["processed"])
    const verdicts = await l.commit(
      o.ownerId,
      [
        accepted("a.json", a.claimId, "m-a"),
        {
          kind: "rejected",
          name: "b.json",
          claimId: b.claimId,
          destName: "b.json",
          reason: "parse",
          detail: "x",
          hash: null,
        },
        accepted("c.json", c.claimId, "m-c"),
        { kind: "vanished", name: "d.json", claimId: d.claimId },
      ],
      now(),
    )
    expect(verdicts).toEqual(["lost", "lost", "processed", "vanished"])
    const processed = await l.sql`SELECT msg_id, claim_id FROM processed ORDER BY msg_id`
    expect(processed.map((r: object) => ({ ...r }))).toEqual([
      { msg_id: "m-a", claim_id: a.claimId },
      { msg_id: "m-c", claim_id: c.claimId },
    ])
    const [counts] = await l.sql`
      SELECT (SELECT COUNT(*)::int FROM duplicates) AS duplicates, (SELECT COUNT(*)::int FROM failures) AS failures`
    expect({ ...counts }).toEqual({ duplicates: 0, failures: 0 })
    expect((await l.listClaims()).map((r) => [r.name, r.ownerId, r.state])).toEqual([
      ["a.json", other.ownerId, "committed"],
      ["b.json", other.ownerId, "claimed"],
      ["c.json", o.ownerId, "committed"],
    ])
  })

  it("adopts a claim in the state it has once a dead owner's last commit lands, not as it was listed", async () => {
    // A consumer killed in the middle of its commit leaves the transaction to the server, which
    // can still commit it after the next consumer has listed the claims as claimed.
    await using db = await tempDatabase()
    const [dying, next] = [await PostgresLedger.open(db.url, "root-a"), await PostgresLedger.open(db.url, "root-a")]
    open.push(dying, next)
    const [o, me] = [currentOwner(), currentOwner()]
    await dying.registerConsumer(o, now())
    const [a] = await dying.claim(o.ownerId, ["a.json"], now())
    if (!a) throw new Error("no claim")
    let entered!: () => void
    let release!: () => void
    const inEffect = new Promise<void>((resolve) => (entered = resolve))
    const gate = new Promise<void>((resolve) => (release = resolve))
    const committing = dying.commit(o.ownerId, [accepted("a.json", a.claimId, "m-a")], now(), async () => {
      entered()
      await gate
    })
    await inEffect
    const listed = await next.listClaims()
    expect(listed.map((r) => [r.name, r.state])).toEqual([["a.json", "claimed"]])
    const adopting = next.adoptClaims(listed, me.ownerId)
    await Bun.sleep(100) // the adoption now waits on the commit's row lock
    release()
    expect(await committing).toEqual(["processed"])
    expect((await adopting).map((r) => [r.name, r.ownerId, r.state, r.dest])).toEqual([
      ["a.json", me.ownerId, "committed", "done"],
    ])
  })
})
