import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { collectGarbageEvery } from "../collect.ts"
import type { Outcome } from "../ledger/model.ts"
import { SqliteLedger } from "../ledger/sqlite/ledger.ts"
import { createQueue } from "../queue/root.ts"
import { csvField, csvRow, formatOrderResult, writeReports } from "./reports.ts"

const NOW = "2026-11-29T10:00:00.000Z"

describe("csvField", () => {
  it.each([
    ["plain", "plain"],
    ["", ""],
    ["with space", "with space"],
    ["a,b", '"a,b"'],
    ['say "hi"', '"say ""hi"""'],
    ['"', '""""'],
    ["line\nbreak", '"line\nbreak"'],
    ["carriage\rreturn", '"carriage\rreturn"'],
    ["crlf\r\n", '"crlf\r\n"'],
    ["semi;colon", "semi;colon"],
    ["tab\there", "tab\there"],
    ["ünïcödé.json", "ünïcödé.json"],
    [42, "42"],
  ] as const)("%p -> %p", (value, expected) => {
    expect(csvField(value)).toBe(expected)
  })
})

describe("csvRow", () => {
  it("joins quoted fields with commas and ends with one LF", () => {
    expect(csvRow(["a,b.json", "parse"])).toBe('"a,b.json",parse\n')
    expect(csvRow(["x", 3, "missing"])).toBe("x,3,missing\n")
  })
})

describe("formatOrderResult", () => {
  it("is exactly OK when there are no problems", () => {
    expect(formatOrderResult([])).toBe("OK\n")
  })

  it("is a header and one row per problem otherwise", () => {
    expect(
      formatOrderResult([
        { order_no: "A,1", seq: 3, problem: "missing" },
        { order_no: "B", seq: 1, problem: "duplicate" },
      ]),
    ).toBe('order_no,seq,problem\n"A,1",3,missing\nB,1,duplicate\n')
  })
})

describe("writeReports", () => {
  it("writes dup.txt ascending and error.csv with one quoted row per file in error/", async () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-reports-"))
    await using _ = { [Symbol.asyncDispose]: async () => fs.rmSync(dir, { recursive: true, force: true }) }
    const q = createQueue(join(dir, "q"))
    const ledger = SqliteLedger.open(q.ledger, { durable: false })
    try {
      const names = ["1.json", "2.json", "3.json", "4.json", 'b,"x".json', "c.json"]
      const claims = ledger.claim("o", names, NOW)
      const id = (n: string) => claims.find((c) => c.name === n)?.claimId ?? ""
      const ok = (name: string, msgId: string): Outcome => ({
        kind: "accepted",
        name,
        claimId: id(name),
        msgId,
        orderNo: "A",
        seq: 1,
        amount: "1",
        hash: name,
        contentHash: msgId,
        message: {},
      })
      ledger.commit(
        "o",
        [
          ok("1.json", "m-z"),
          ok("2.json", "m-z"),
          ok("3.json", "m-a"),
          ok("4.json", "m-a"),
          {
            kind: "rejected",
            name: 'b,"x".json',
            claimId: id('b,"x".json'),
            destName: 'b,"x".json',
            reason: "parse",
            detail: "d",
            hash: null,
          },
          {
            kind: "rejected",
            name: "c.json",
            claimId: id("c.json"),
            destName: "c.json",
            reason: "missing-field",
            detail: "d",
            hash: null,
          },
        ],
        NOW,
      )
      for (const n of ['b,"x".json', "c.json", "stray.json"]) fs.writeFileSync(join(q.error, n), "")
      await writeReports(q, ledger)
      expect(fs.readFileSync(join(q.root, "dup.txt"), "utf8")).toBe("m-a\nm-z\n")
      expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe(
        'file,reason\n"b,""x"".json",parse\nc.json,missing-field\nstray.json,unknown\n',
      )
    } finally {
      ledger.close()
    }
  })

  it("writes an empty dup.txt and a header-only error.csv for an empty queue", async () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-reports-"))
    await using _ = { [Symbol.asyncDispose]: async () => fs.rmSync(dir, { recursive: true, force: true }) }
    const q = createQueue(join(dir, "q"))
    const ledger = SqliteLedger.open(q.ledger, { durable: false })
    try {
      await writeReports(q, ledger)
      expect(fs.readFileSync(join(q.root, "dup.txt"), "utf8")).toBe("")
      expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe("file,reason\n")
    } finally {
      ledger.close()
    }
  })

  it("counts each row it writes toward collectGarbageEvery, as a tenth of a file", async () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-reports-"))
    await using _ = { [Symbol.asyncDispose]: async () => fs.rmSync(dir, { recursive: true, force: true }) }
    const q = createQueue(join(dir, "q"))
    const ledger = SqliteLedger.open(q.ledger, { durable: false })
    for (const n of ["a.json", "b.json", "c.json"]) fs.writeFileSync(join(q.error, n), "")
    const gc = Bun.gc
    let full = 0
    Bun.gc = (force?: boolean) => {
      if (force) full++
      return gc(force)
    }
    collectGarbageEvery(0.1)
    try {
      await writeReports(q, ledger)
    } finally {
      collectGarbageEvery(0)
      Bun.gc = gc
      ledger.close()
    }
    expect(full).toBe(3) // the three rows of error.csv; dup.txt and conflicts.csv are empty
  })
})
