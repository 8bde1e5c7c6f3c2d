import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { SpoolError } from "../../errors.ts"
import type { Outcome } from "../model.ts"
import { SqliteLedger as Ledger, schemaVersion } from "./ledger.ts"

const NOW = "2026-11-29T10:00:00.000Z"

interface TempLedger extends AsyncDisposable {
  readonly dir: string
  readonly path: string
  open(): Ledger
}

/** A fresh directory with a ledger path in it; every Ledger opened through it is closed on dispose. */
async function tempLedger(): Promise<TempLedger> {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-ledger-"))
  const path = join(dir, "ledger.db")
  const opened: Ledger[] = []
  return {
    dir,
    path,
    open() {
      const l = Ledger.open(path, { durable: false })
      opened.push(l)
      return l
    },
    async [Symbol.asyncDispose]() {
      for (const l of opened) {
        try {
          l.close()
        } catch {}
      }
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** An accepted outcome; `content` stands for the message's canonical content (conflicts compare it). */
function accepted(name: string, claimId: string, msgId: string, content = `c-${msgId}`): Outcome {
  return {
    kind: "accepted",
    name,
    claimId,
    msgId,
    orderNo: "A-1",
    seq: 1,
    amount: "1.10",
    hash: `bytes-${name}`,
    contentHash: content,
    message: { msg_id: msgId },
  }
}

function rejected(name: string, claimId: string, reason = "parse", detail = `why ${name}`): Outcome {
  return { kind: "rejected", name, claimId, destName: name, reason, detail, hash: null }
}

describe("Ledger.transaction", () => {
  it("waits for a write lock another process holds, then commits", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const held = join(t.dir, "held")
    const holder = Bun.spawn(
      [
        "bun",
        "-e",
        `const { Database } = require("bun:sqlite"); const db = new Database(${JSON.stringify(t.path)});
         db.exec("BEGIN IMMEDIATE"); require("fs").writeFileSync(${JSON.stringify(held)}, "");
         Bun.sleepSync(300); db.exec("COMMIT"); db.close()`,
      ],
      { stdout: "ignore", stderr: "pipe" },
    )
    for (let i = 0; i < 1000 && !fs.existsSync(held); i++) await Bun.sleep(10)
    expect(fs.existsSync(held)).toBe(true)
    // The lock is held now: this waits (busy timeout 10 s) and goes through once it is released.
    expect(l.transaction(() => l.claim("o", ["a.json"], NOW).map((c) => c.name))).toEqual(["a.json"])
    expect(await holder.exited).toBe(0)
    expect(l.listClaims().map((c) => c.name)).toEqual(["a.json"])
  })

  it("rolls back everything when fn throws, and runs a nested call in a savepoint", async () => {
    await using t = await tempLedger()
    const l = t.open()
    expect(() =>
      l.transaction(() => {
        l.claim("o", ["a.json"], NOW)
        throw new Error("no")
      }),
    ).toThrow("no")
    expect(l.listClaims()).toEqual([])
    l.transaction(() => {
      l.claim("o", ["b.json"], NOW)
      expect(() =>
        l.transaction(() => {
          l.claim("o", ["c.json"], NOW)
          throw new Error("inner")
        }),
      ).toThrow("inner")
    })
    expect(l.listClaims().map((c) => c.name)).toEqual(["b.json"])
    expect(l.db.inTransaction).toBe(false)
  })
})

describe("Ledger.open", () => {
  it("creates the schema at the current version", async () => {
    await using t = await tempLedger()
    const l = t.open()
    expect(l.db.query("PRAGMA user_version").get()).toEqual({ user_version: schemaVersion })
    expect(l.db.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" })
    const tables = l.db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all()
    expect(tables.map((r) => (r as { name: string }).name)).toEqual([
      "claims",
      "consumers",
      "deferrals",
      "duplicates",
      "failures",
      "horizon",
      "processed",
      "replays",
    ])
  })

  it("opens an existing ledger again without migrating twice", async () => {
    await using t = await tempLedger()
    t.open().close()
    const l = t.open()
    expect(l.db.query("PRAGMA user_version").get()).toEqual({ user_version: schemaVersion })
  })

  it("migrates exactly once when several processes open a new ledger at the same moment", async () => {
    await using t = await tempLedger()
    const script = join(t.dir, "open.ts")
    const go = join(t.dir, "go")
    fs.writeFileSync(
      script,
      `import fs from "node:fs"
import { SqliteLedger as Ledger } from ${JSON.stringify(join(import.meta.dir, "ledger.ts"))}
fs.writeFileSync(process.argv[3] + "." + process.pid, "")
const deadline = Date.now() + 20_000
while (!fs.existsSync(process.argv[3]) && Date.now() < deadline) Bun.sleepSync(1)
Ledger.open(process.argv[2], { durable: false }).close()
`,
    )
    // Every process waits for the same go file, so the opens overlap as closely as they can.
    const procs = Array.from({ length: 4 }, () =>
      Bun.spawn(["bun", script, t.path, go], { stdout: "pipe", stderr: "pipe", stdin: "ignore" }),
    )
    const deadline = Date.now() + 20_000
    while (fs.readdirSync(t.dir).filter((n) => n.startsWith("go.")).length < 4 && Date.now() < deadline)
      await Bun.sleep(5)
    fs.writeFileSync(go, "")
    const results = await Promise.all(
      procs.map(async (p) => ({ code: await p.exited, stderr: await new Response(p.stderr).text() })),
    )
    expect(results).toEqual(Array.from({ length: 4 }, () => ({ code: 0, stderr: "" })))
    const db = new Database(t.path, { readonly: true })
    try {
      expect(db.query("PRAGMA user_version").get()).toEqual({ user_version: schemaVersion })
      expect(db.query("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get()).toEqual({ n: 8 })
    } finally {
      db.close()
    }
  })

  it("refuses a ledger written by a newer spool", async () => {
    await using t = await tempLedger()
    t.open().close()
    const db = new Database(t.path)
    db.exec(`PRAGMA user_version = ${schemaVersion + 1}`)
    db.close()
    expect(() => t.open()).toThrow(SpoolError)
    expect(() => t.open()).toThrow(/newer spool/)
  })

  it("refuses to open read-only a ledger that does not exist yet", async () => {
    await using t = await tempLedger()
    expect(() => Ledger.open(t.path, { readonly: true })).toThrow(SpoolError)
    expect(fs.existsSync(t.path)).toBe(false)
  })

  it("says a file that is not SQLite is not a spool ledger", async () => {
    await using t = await tempLedger()
    fs.writeFileSync(t.path, "this is not a database, just some text that is long enough to have a header")
    let error: unknown
    try {
      t.open()
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(SpoolError)
    expect((error as SpoolError).code).toBe("ledger")
  })
})

describe("Ledger.claim", () => {
  it("gives each name to one owner only, even through two connections", async () => {
    await using t = await tempLedger()
    const a = t.open()
    const b = t.open()
    const byA = a.claim("owner-a", ["x.json", "y.json"], NOW)
    const byB = b.claim("owner-b", ["y.json", "z.json"], NOW)
    expect(byA.map((c) => c.name)).toEqual(["x.json", "y.json"])
    expect(byB.map((c) => c.name)).toEqual(["z.json"])
    expect(byA.every((c) => c.attempts === 1)).toBe(true)
    const owners = Object.fromEntries(a.listClaims().map((r) => [r.name, r.ownerId]))
    expect(owners).toEqual({ "x.json": "owner-a", "y.json": "owner-a", "z.json": "owner-b" })
  })

  it("hands out distinct claim ids", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const ids = l.claim("o", ["a.json", "b.json", "c.json"], NOW).map((c) => c.claimId)
    expect(new Set(ids).size).toBe(3)
  })

  it("frees a name again after release, and only for the releasing owner", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const [c] = l.claim("o1", ["a.json"], NOW)
    if (c === undefined) throw new Error("no claim")
    l.release("o2", [c])
    expect(l.claim("o2", ["a.json"], NOW)).toEqual([])
    l.release("o1", [c])
    expect(l.claim("o2", ["a.json"], NOW).map((x) => x.name)).toEqual(["a.json"])
  })

  it("forgets the committed claims it is given at the next claim, so the name can come again", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const [a, b] = l.claim("o", ["a.json", "b.json"], NOW)
    if (a === undefined || b === undefined) throw new Error("no claim")
    l.commit("o", [accepted("a.json", a.claimId, "m1"), accepted("b.json", b.claimId, "m2")], NOW)
    expect(l.listClaims()).toMatchObject([
      { name: "a.json", state: "committed", dest: "done" },
      { name: "b.json", state: "committed", dest: "done" },
    ])
    // b.json's file may still be in processing/ (its move is in flight): only a.json is forgotten.
    expect(l.claim("o", ["a.json", "b.json"], NOW, [a]).map((x) => x.name)).toEqual(["a.json"])
    expect(l.listClaims().map((r) => [r.name, r.state])).toEqual([
      ["b.json", "committed"],
      ["a.json", "claimed"],
    ])
  })

  it("never forgets a claim that is not committed, nor one whose claim_id does not match", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const [a] = l.claim("o", ["a.json"], NOW)
    if (a === undefined) throw new Error("no claim")
    l.claim("o", [], NOW, [a, { name: "a.json", claimId: "other", attempts: 1 }])
    expect(l.listClaims().map((r) => [r.name, r.state])).toEqual([["a.json", "claimed"]])
  })
})

describe("Ledger.forgetConsumers", () => {
  it("deletes the rows of consumers that hold no claim, and keeps the one that still does", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const owner = (ownerId: string) => ({ ownerId, host: "h", pid: 1, bootId: "b", startTicks: "7" })
    for (const id of ["idle", "holding", "bystander"]) l.registerConsumer(owner(id), NOW)
    l.claim("holding", ["a.json"], NOW)
    expect(l.listConsumers().sort((a, b) => a.ownerId.localeCompare(b.ownerId))).toEqual(
      ["bystander", "holding", "idle"].map(owner),
    )
    l.forgetConsumers(["idle", "holding"])
    expect(
      l
        .listConsumers()
        .map((o) => o.ownerId)
        .sort(),
    ).toEqual(["bystander", "holding"])
    expect(l.listClaims().map((r) => [r.name, r.owner?.ownerId])).toEqual([["a.json", "holding"]])
  })
})

describe("Ledger.commit", () => {
  it("returns processed, duplicate, conflict and rejected verdicts and records each", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const claims = l.claim("o", ["1.json", "2.json", "3.json", "4.json"], NOW)
    const id = (n: string) => claims.find((c) => c.name === n)?.claimId ?? ""
    const verdicts = l.commit(
      "o",
      [
        accepted("1.json", id("1.json"), "m1", "same"),
        accepted("2.json", id("2.json"), "m1", "same"),
        accepted("3.json", id("3.json"), "m1", "other"),
        rejected("4.json", id("4.json"), "missing-field"),
      ],
      NOW,
    )
    expect(verdicts).toEqual(["processed", "duplicate", "conflict", "rejected"])
    expect(l.db.query("SELECT msg_id, file, amount FROM processed").all()).toEqual([
      { msg_id: "m1", file: "1.json", amount: "1.10" },
    ])
    expect(l.db.query("SELECT msg_id, file, is_conflict FROM duplicates ORDER BY file").all()).toEqual([
      { msg_id: "m1", file: "2.json", is_conflict: 0 },
      { msg_id: "m1", file: "3.json", is_conflict: 1 },
    ])
    expect(l.db.query("SELECT file, original, reason, detail FROM failures").all()).toEqual([
      { file: "4.json", original: "4.json", reason: "missing-field", detail: "why 4.json" },
    ])
    expect([...l.duplicateIds()]).toEqual(["m1"])
    expect(l.failureReason("4.json")).toBe("missing-field")
  })

  it("runs the effect once, for the first delivery only, inside the transaction", async () => {
    await using t = await tempLedger()
    const l = t.open()
    l.db.exec("CREATE TABLE effects (msg_id TEXT)")
    const claims = l.claim("o", ["1.json", "2.json"], NOW)
    const effect = (o: { msgId: string }, db: Database) => {
      db.query("INSERT INTO effects VALUES (?)").run(o.msgId)
    }
    l.commit(
      "o",
      claims.map((c) => accepted(c.name, c.claimId, "m1")),
      NOW,
      effect,
    )
    expect(l.db.query("SELECT msg_id FROM effects").all()).toEqual([{ msg_id: "m1" }])
  })

  it("rolls back only the message whose effect throws and sends it to error/ as handler", async () => {
    await using t = await tempLedger()
    const l = t.open()
    l.db.exec("CREATE TABLE effects (msg_id TEXT)")
    const claims = l.claim("o", ["1.json", "2.json", "3.json"], NOW)
    const outcomes = claims.map((c, i) => accepted(c.name, c.claimId, `m${i + 1}`))
    const verdicts = l.commit("o", outcomes, NOW, (o, db) => {
      db.query("INSERT INTO effects VALUES (?)").run(o.msgId)
      if (o.msgId === "m2") throw new Error("effect failed")
    })
    expect(verdicts).toEqual(["processed", "handler-rejected", "processed"])
    expect(l.db.query("SELECT msg_id FROM effects ORDER BY msg_id").all()).toEqual([{ msg_id: "m1" }, { msg_id: "m3" }])
    expect(l.db.query("SELECT msg_id FROM processed ORDER BY msg_id").all()).toEqual([
      { msg_id: "m1" },
      { msg_id: "m3" },
    ])
    expect(l.db.query("SELECT file, reason, detail FROM failures").all()).toEqual([
      { file: "2.json", reason: "handler", detail: "effect failed" },
    ])
    expect(l.listClaims().map((r) => [r.name, r.dest])).toEqual([
      ["1.json", "done"],
      ["2.json", "error"],
      ["3.json", "done"],
    ])
  })

  it("stores a detail carrying U+0000 or a lone surrogate as escapes, as the PostgreSQL ledger does", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const [a, b, c] = l.claim("o", ["a.json", "b.json", "c.json"], NOW)
    if (!a || !b || !c) throw new Error("not claimed")
    const verdicts = l.commit(
      "o",
      [
        rejected("a.json", a.claimId, "parse", "token '\0' and \ud800"),
        accepted("b.json", b.claimId, "m-b"),
        accepted("c.json", c.claimId, "m-c"),
      ],
      NOW,
      (o) => {
        if (o.msgId === "m-b") throw new Error("refused \udfff\0")
      },
    )
    expect(verdicts).toEqual(["rejected", "handler-rejected", "processed"])
    expect(l.db.query("SELECT file, reason, detail FROM failures ORDER BY file").all()).toEqual([
      { file: "a.json", reason: "parse", detail: "token '\\u0000' and \\ud800" },
      { file: "b.json", reason: "handler", detail: "refused \\udfff\\u0000" },
    ])
    expect(l.db.query("SELECT msg_id FROM processed").all()).toEqual([{ msg_id: "m-c" }])
  })

  it("lists distinct duplicate msg_ids in ascending order", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const names = ["a", "b", "c", "d", "e", "f"].map((n) => `${n}.json`)
    const claims = l.claim("o", names, NOW)
    const ids = ["m-b", "m-b", "m-a", "m-a", "m-b", "m-c"]
    l.commit(
      "o",
      claims.map((c, i) => accepted(c.name, c.claimId, ids[i] ?? "")),
      NOW,
    )
    expect([...l.duplicateIds()]).toEqual(["m-a", "m-b"])
  })
})

describe("Ledger.commit fences each outcome by its claim's owner", () => {
  it("records nothing for a claim another consumer took over, and ends a vanished file's claim", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const [a, b, c, d] = l.claim("o", ["a.json", "b.json", "c.json", "d.json"], NOW)
    if (!a || !b || !c || !d) throw new Error("no claim")
    // Another consumer adopts a.json and b.json (o's lease ran out) and finishes a.json.
    const taken = l.adoptClaims(
      l.listClaims().filter((r) => r.name === "a.json" || r.name === "b.json"),
      "other",
    )
    expect(taken.map((r) => r.name)).toEqual(["a.json", "b.json"])
    expect(l.commit("other", [accepted("a.json", a.claimId, "m-a")], NOW)).toEqual(["processed"])
    const verdicts = l.commit(
      "o",
      [
        accepted("a.json", a.claimId, "m-a"),
        rejected("b.json", b.claimId),
        accepted("c.json", c.claimId, "m-c"),
        { kind: "vanished", name: "d.json", claimId: d.claimId },
      ],
      NOW,
    )
    expect(verdicts).toEqual(["lost", "lost", "processed", "vanished"])
    expect(l.db.query("SELECT msg_id, claim_id FROM processed ORDER BY msg_id").all()).toEqual([
      { msg_id: "m-a", claim_id: a.claimId },
      { msg_id: "m-c", claim_id: c.claimId },
    ])
    expect(l.db.query("SELECT COUNT(*) AS n FROM duplicates").get()).toEqual({ n: 0 })
    expect(l.db.query("SELECT COUNT(*) AS n FROM failures").get()).toEqual({ n: 0 })
    expect(l.listClaims().map((r) => [r.name, r.ownerId, r.state])).toEqual([
      ["a.json", "other", "committed"],
      ["b.json", "other", "claimed"],
      ["c.json", "o", "committed"],
    ])
  })
})

describe("Ledger.markReplayed", () => {
  it("marks the latest failure of a file replayed once, and logs every replay", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const [c] = l.claim("o", ["bad.json"], NOW)
    if (c === undefined) throw new Error("no claim")
    l.commit("o", [rejected("bad.json", c.claimId)], NOW)
    expect(l.markReplayed("bad.json", NOW)).toBe(true)
    expect(l.failureReason("bad.json")).toBeUndefined()
    expect(l.db.query("SELECT replayed_at FROM failures").all()).toEqual([{ replayed_at: NOW }])
    expect(l.markReplayed("bad.json", NOW)).toBe(false)
    expect(l.markReplayed("never.json", NOW)).toBe(false)
    expect(l.db.query("SELECT file, failure_id FROM replays ORDER BY id").all()).toEqual([
      { file: "bad.json", failure_id: 1 },
      { file: "bad.json", failure_id: null },
      { file: "never.json", failure_id: null },
    ])
  })

  it("follows a failure renamed at move time", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const [c] = l.claim("o", ["bad.json"], NOW)
    if (c === undefined) throw new Error("no claim")
    l.commit("o", [rejected("bad.json", c.claimId)], NOW)
    l.renameFailure(c.claimId, "bad~1.json")
    expect(l.failureReason("bad.json")).toBeUndefined()
    expect(l.failureReason("bad~1.json")).toBe("parse")
    expect(l.markReplayed("bad~1.json", NOW)).toBe(true)
  })
})

describe("Ledger.orderProblems", () => {
  it("finds duplicated and missing seqs, including a gap before the first", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const rows: [string, string, number][] = [
      ["x1", "X", 1],
      ["x2", "X", 2],
      ["x4", "X", 4],
      ["y1", "Y", 1],
      ["y1b", "Y", 1],
      ["z3", "Z", 3],
      ["ok1", "OK", 1],
    ]
    const claims = l.claim(
      "o",
      rows.map(([m]) => `${m}.json`),
      NOW,
    )
    l.commit(
      "o",
      rows.map(([m, order, seq], i) => ({
        kind: "accepted" as const,
        name: `${m}.json`,
        claimId: claims[i]?.claimId ?? "",
        msgId: m,
        orderNo: order,
        seq,
        amount: "1",
        hash: m,
        contentHash: m,
        message: {},
      })),
      NOW,
    )
    expect(l.orderProblems()).toEqual([
      { order_no: "X", seq: 3, problem: "missing" },
      { order_no: "Y", seq: 1, problem: "duplicate" },
      { order_no: "Z", seq: 1, problem: "missing" },
      { order_no: "Z", seq: 2, problem: "missing" },
    ])
  })
})
