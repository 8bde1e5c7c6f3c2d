// What replay, the reports and stats ask of a ledger, asked of both adapters alike through
// LedgerPort. The PostgreSQL half is skipped, with the reason printed, when no server answers.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { pgUnavailable, tempDatabase } from "@spool/test-support"
import { SpoolError } from "../errors.ts"
import type { Outcome } from "./model.ts"
import type { LedgerPort } from "./port.ts"
import { PostgresLedger } from "./postgres/ledger.ts"
import { SqliteLedger as Ledger } from "./sqlite/ledger.ts"

const NOW = "2026-11-29T10:00:00.000Z"
const LATER = "2026-11-29T11:00:00.000Z"

type Opened = { readonly ledger: LedgerPort } & AsyncDisposable

async function onSqlite(): Promise<Opened> {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-port-"))
  const ledger = Ledger.open(join(dir, "ledger.db"), { durable: false })
  return {
    ledger,
    async [Symbol.asyncDispose]() {
      ledger.close()
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

async function onPostgres(): Promise<Opened> {
  const db = await tempDatabase()
  const ledger = await PostgresLedger.open(db.url, "root-a")
  return {
    ledger,
    async [Symbol.asyncDispose]() {
      await ledger.close()
      await db[Symbol.asyncDispose]()
    },
  }
}

const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)

const backends = [
  { name: "SQLite", open: onSqlite, skip: undefined },
  { name: "PostgreSQL", open: onPostgres, skip: pgSkip },
] as const

function rejected(name: string, claimId: string, reason: string, hash: string | null = null): Outcome {
  return { kind: "rejected", name, claimId, destName: name, reason, detail: "", hash }
}

/** Sends each [name, reason, hash?] to error/ as consume does: claimed, committed, forgotten. */
async function fail(l: LedgerPort, ...failures: [string, string, string?][]): Promise<void> {
  const claims = await l.claim(
    "o",
    failures.map(([n]) => n),
    NOW,
  )
  await l.commit(
    "o",
    claims.map((c, i) => {
      const [, reason, hash] = failures[i] as [string, string, string?]
      return rejected(c.name, c.claimId, reason, hash ?? null)
    }),
    NOW,
  )
  await l.claim("o", [], NOW, claims)
}

for (const backend of backends)
  (backend.skip ? describe.skip : describe)(`LedgerPort on ${backend.name}`, () => {
    it("gives the reason of each file's latest failure not replayed yet", async () => {
      await using t = await backend.open()
      await fail(t.ledger, ["a.json", "parse"], ["b.json", "missing-field"])
      await t.ledger.markReplayed("b.json", NOW)
      await fail(t.ledger, ["a.json", "invalid-field"])
      expect(await t.ledger.failureReasons()).toEqual(new Map([["a.json", "invalid-field"]]))
      expect(await t.ledger.failureReason("a.json")).toBe("invalid-field")
    })

    it("gives the latest unreplayed failure of a file with its hash and time, none once replayed", async () => {
      await using t = await backend.open()
      const hash = "ab".repeat(32)
      await fail(t.ledger, ["a.json", "parse", "cd".repeat(32)])
      await t.ledger.markReplayed("a.json", NOW)
      await fail(t.ledger, ["a.json", "missing-field", hash], ["big.json", "too-large"])
      expect(await t.ledger.unreplayedFailure("a.json")).toEqual({
        reason: "missing-field",
        payloadHash: hash,
        failedAt: NOW,
      })
      expect(await t.ledger.unreplayedFailure("big.json")).toEqual({
        reason: "too-large",
        payloadHash: null,
        failedAt: NOW,
      })
      await t.ledger.markReplayed("a.json", LATER)
      expect(await t.ledger.unreplayedFailure("a.json")).toBeUndefined()
      expect(await t.ledger.unreplayedFailure("never.json")).toBeUndefined()
    })

    it("records a replay: the failure marked, the replay logged, then the move", async () => {
      await using t = await backend.open()
      await fail(t.ledger, ["a.json", "parse"])
      const seen: (string | undefined)[] = []
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
      await using t = await backend.open()
      await fail(t.ledger, ["a.json", "parse"])
      await t.ledger.markReplayed("a.json", NOW)
      await fail(t.ledger, ["a.json", "parse"])
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
      await using t = await backend.open()
      await fail(t.ledger, ["a.json", "parse"])
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

    it("counts a window's statistics from its start", async () => {
      await using t = await backend.open()
      await fail(t.ledger, ["a.json", "parse"])
      await t.ledger.recordReplay("a.json", LATER, () => {})
      const all = await t.ledger.stats(new Date("2026-11-29T09:00:00.000Z"))
      expect(all.allTime).toMatchObject({ processed: 0, failures: 1, replays: 1 })
      expect(all.recent).toMatchObject({ failures: 1, replays: 1 })
      expect(all.openFailures).toEqual({})
      const late = await t.ledger.stats(new Date("2026-11-29T10:30:00.000Z"))
      expect(late.recent).toMatchObject({ failures: 0, replays: 1 })
    })

    it("runs the report writer under its report lock and returns what it returns, or its failure", async () => {
      await using t = await backend.open()
      await fail(t.ledger, ["a.json", "parse"])
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
  })
