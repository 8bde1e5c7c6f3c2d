// The commit verdict rules through the port, on both ledgers from one table of cases: each
// backend must give the same verdicts and write the same history for the same batch.
import { afterAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pgUnavailable, tempDatabase } from "@spool/test-support"
import type { SQL } from "bun"
import type { Owner } from "../queue/owner.ts"
import type { AcceptedOutcome, Claim, Outcome, Verdict } from "./model.ts"
import type { LedgerPort } from "./port.ts"
import { PostgresLedger } from "./postgres/ledger.ts"
import { SqliteLedger } from "./sqlite/ledger.ts"

const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)

const NOW = "2026-01-02T03:04:05.000Z"

/** A ledger on one backend, with an effect that throws for the named files and records the others. */
interface Subject {
  readonly ledger: LedgerPort<never>
  commit(ownerId: string, outcomes: readonly Outcome[], now: string, failOn?: ReadonlySet<string>): Promise<Verdict[]>
  /** The rows of a query both backends read alike. */
  rows(query: string): Promise<unknown[]>
  close(): Promise<void>
}

async function sqlite(): Promise<Subject> {
  const dir = fs.mkdtempSync(join(tmpdir(), "spool-verdicts-"))
  const l = SqliteLedger.open(join(dir, "ledger.db"))
  l.db.exec("CREATE TABLE applied (msg_id TEXT NOT NULL)")
  return {
    ledger: l,
    async commit(ownerId, outcomes, now, failOn) {
      return l.commit(ownerId, outcomes, now, (o, db) => {
        db.run("INSERT INTO applied (msg_id) VALUES (?)", [o.msgId])
        if (failOn?.has(o.name)) throw new Error(`refused ${o.name}`)
      })
    },
    rows: async (query) => l.db.query(query).all(),
    async close() {
      l.close()
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

async function postgres(): Promise<Subject> {
  const db = await tempDatabase()
  const l = await PostgresLedger.open(db.url, "root-a")
  await l.sql`CREATE TABLE applied (msg_id text NOT NULL)`
  return {
    ledger: l,
    async commit(ownerId, outcomes, now, failOn) {
      return l.commit(ownerId, outcomes, now, async (o, tx: SQL) => {
        await tx`INSERT INTO applied (msg_id) VALUES (${o.msgId})`
        if (failOn?.has(o.name)) throw new Error(`refused ${o.name}`)
      })
    },
    rows: async (query) => [...(await l.sql.unsafe(query))],
    async close() {
      await l.close()
      await db[Symbol.asyncDispose]()
    },
  }
}

const backends = [
  { name: "SQLite", open: sqlite, skip: undefined },
  { name: "PostgreSQL", open: postgres, skip: pgSkip },
] as const

function owner(id: string): Owner {
  return { ownerId: id, host: "test-host", pid: 1, bootId: "boot", startTicks: "1" }
}

function accepted(c: Claim, msgId: string, fields: Partial<AcceptedOutcome> = {}): AcceptedOutcome {
  return {
    kind: "accepted",
    name: c.name,
    claimId: c.claimId,
    msgId,
    orderNo: "A-1",
    seq: 1,
    amount: "1.10",
    hash: `bytes-${c.name}`,
    contentHash: `c-${msgId}`,
    message: { msg_id: msgId },
    ...fields,
  }
}

for (const backend of backends)
  (backend.skip ? describe.skip : describe)(`the commit verdicts on ${backend.name}`, () => {
    const subjects: Subject[] = []
    afterAll(async () => {
      for (const s of subjects) await s.close().catch(() => {})
    })
    async function open(): Promise<Subject & { claim(names: string[], ownerId?: string): Promise<Claim[]> }> {
      const s = await backend.open()
      subjects.push(s)
      for (const id of ["a", "b"]) await s.ledger.registerConsumer(owner(id), NOW)
      return { ...s, claim: async (names, ownerId = "a") => s.ledger.claim(ownerId, names, NOW) }
    }

    it("decides every kind of outcome in one batch, first delivery winning in batch order", async () => {
      const s = await open()
      const [p, dup, conflict, bad, gone] = await s.claim(["p.json", "dup.json", "c.json", "bad.json", "v.json"])
      const [other] = await s.claim(["other.json"], "b")
      const batch: Outcome[] = [
        accepted(p as Claim, "m-1"),
        accepted(dup as Claim, "m-1"),
        accepted(conflict as Claim, "m-1", { contentHash: "c-other" }),
        { kind: "rejected", ...(bad as Claim), destName: "bad.json", reason: "parse", detail: "x\u0000y", hash: null },
        { kind: "vanished", name: (gone as Claim).name, claimId: (gone as Claim).claimId },
        accepted(other as Claim, "m-2"),
      ]
      expect(await s.commit("a", batch, NOW)).toEqual([
        "processed",
        "duplicate",
        "conflict",
        "rejected",
        "vanished",
        "lost",
      ])
      expect(await s.rows("SELECT msg_id, file FROM processed ORDER BY msg_id")).toEqual([
        { msg_id: "m-1", file: "p.json" },
      ])
      expect(await s.rows("SELECT file, is_conflict FROM duplicates ORDER BY id")).toEqual([
        { file: "dup.json", is_conflict: 0 },
        { file: "c.json", is_conflict: 1 },
      ])
      expect(await s.rows("SELECT file, reason, detail FROM failures ORDER BY id")).toEqual([
        { file: "bad.json", reason: "parse", detail: "x\\u0000y" },
      ])
      expect(await s.rows("SELECT name FROM claims WHERE state = 'committed' ORDER BY name")).toEqual([
        { name: "bad.json" },
        { name: "c.json" },
        { name: "dup.json" },
        { name: "p.json" },
      ])
      expect(await s.rows("SELECT msg_id FROM applied")).toEqual([{ msg_id: "m-1" }])
    })

    it("frees the key of a delivery whose effect threw for the next delivery of the msg_id in the batch", async () => {
      const s = await open()
      const [first, second, third] = await s.claim(["x-1.json", "x-2.json", "x-3.json"])
      const batch = [
        accepted(first as Claim, "m-x"),
        accepted(second as Claim, "m-x"),
        accepted(third as Claim, "m-x", { contentHash: "c-other" }),
      ]
      expect(await s.commit("a", batch, NOW, new Set(["x-1.json"]))).toEqual([
        "handler-rejected",
        "processed",
        "conflict",
      ])
      expect(await s.rows("SELECT file FROM processed")).toEqual([{ file: "x-2.json" }])
      expect(await s.rows("SELECT file, reason, detail FROM failures")).toEqual([
        { file: "x-1.json", reason: "handler", detail: "refused x-1.json" },
      ])
      expect(await s.rows("SELECT msg_id FROM applied")).toEqual([{ msg_id: "m-x" }])
      expect(await s.rows("SELECT name, dest FROM claims ORDER BY name")).toEqual([
        { name: "x-1.json", dest: "error" },
        { name: "x-2.json", dest: "done" },
        { name: "x-3.json", dest: "done" },
      ])
    })

    it("rejects every delivery whose effect throws, and commits the rest of the batch", async () => {
      const s = await open()
      const [a1, a2, b] = await s.claim(["a-1.json", "a-2.json", "b.json"])
      const batch = [accepted(a1 as Claim, "m-a"), accepted(a2 as Claim, "m-a"), accepted(b as Claim, "m-b")]
      expect(await s.commit("a", batch, NOW, new Set(["a-1.json", "a-2.json"]))).toEqual([
        "handler-rejected",
        "handler-rejected",
        "processed",
      ])
      expect(await s.rows("SELECT file FROM failures ORDER BY id")).toEqual([
        { file: "a-1.json" },
        { file: "a-2.json" },
      ])
      expect(await s.rows("SELECT msg_id FROM applied")).toEqual([{ msg_id: "m-b" }])
    })

    it("refuses an unknown msg_id at or below its order's pruned seq, and takes one above it", async () => {
      const s = await open()
      const [old] = await s.claim(["old.json"])
      expect(await s.commit("a", [accepted(old as Claim, "m-old", { seq: 5 })], NOW)).toEqual(["processed"])
      await s.ledger.compact("2999-01-01T00:00:00.000Z", "2999-01-01T00:00:00.000Z", NOW)
      const [below, at, above, again] = await s.claim(["below.json", "at.json", "above.json", "again.json"])
      const batch = [
        accepted(below as Claim, "m-below", { seq: 3 }),
        accepted(at as Claim, "m-at", { seq: 5 }),
        accepted(above as Claim, "m-above", { seq: 6 }),
        accepted(again as Claim, "m-above", { seq: 6 }),
      ]
      expect(await s.commit("a", batch, NOW)).toEqual(["beyond-horizon", "beyond-horizon", "processed", "duplicate"])
      expect(await s.rows("SELECT file, reason FROM failures ORDER BY id")).toEqual([
        { file: "below.json", reason: "beyond-horizon" },
        { file: "at.json", reason: "beyond-horizon" },
      ])
      expect(
        await s.rows("SELECT name, dest FROM claims WHERE name IN ('below.json', 'above.json') ORDER BY name"),
      ).toEqual([
        { name: "above.json", dest: "done" },
        { name: "below.json", dest: "error" },
      ])
    })

    it("keeps each order's highest pruned seq in the horizon across compactions, never lowering it", async () => {
      const s = await open()
      const far = "2999-01-01T00:00:00.000Z"
      const [high, low] = await s.claim(["high.json", "low.json"])
      await s.commit("a", [accepted(high as Claim, "m-high", { seq: 7 })], "2026-01-01T00:00:00.000Z")
      await s.commit("a", [accepted(low as Claim, "m-low", { seq: 2 })], "2026-01-03T00:00:00.000Z")
      const summary = { duplicates: 0, failures: 0, replays: 0, keys: 1 }
      expect(await s.ledger.compact(far, "2026-01-02T00:00:00.000Z", NOW)).toEqual(summary)
      expect(await s.ledger.compact(far, far, NOW)).toEqual(summary)
      expect(
        await s.rows(
          "SELECT order_no, CAST(max_seq AS INTEGER) AS max_seq, CAST(pruned AS INTEGER) AS pruned FROM horizon",
        ),
      ).toEqual([{ order_no: "A-1", max_seq: 7, pruned: 2 }])
    })
  })
