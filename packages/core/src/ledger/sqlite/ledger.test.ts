// The SQLite adapter's own behaviour: its transactions, its file and its migrations. What every
// ledger does is the contract's (ledger/contract.test.ts), run on this adapter too.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { SpoolError } from "../../errors.ts"
import { statements } from "../statements.ts"
import { SqliteLedger as Ledger, schemaVersion } from "./ledger.ts"

const NOW = "2026-11-29T10:00:00.000Z"

interface TempLedger extends AsyncDisposable {
  readonly dir: string
  readonly path: string
  open(durable?: boolean): Ledger
}

/** A fresh directory with a ledger path in it; every Ledger opened through it is closed on dispose. */
async function tempLedger(): Promise<TempLedger> {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-ledger-"))
  const path = join(dir, "ledger.db")
  const opened: Ledger[] = []
  return {
    dir,
    path,
    open(durable = false) {
      const l = Ledger.open(path, { durable })
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

describe("Ledger.claimLanded", () => {
  // What a power cut leaves cannot be observed here; what can is the level each claim commits at.
  it.each([
    [true, { landed: 2, claimed: 1 }],
    [false, { landed: 1, claimed: 1 }],
  ])(
    "commits a landed claim at the ledger's own level (FULL when durable), a file's claim lazily (durable: %p)",
    async (durable, levels) => {
      await using t = await tempLedger()
      const l = t.open(durable)
      l.db.exec(`CREATE TEMP TABLE seen (what TEXT, level INTEGER);
        CREATE TEMP TRIGGER landed AFTER INSERT ON origins
          BEGIN INSERT INTO seen SELECT 'landed', synchronous FROM pragma_synchronous; END;
        CREATE TEMP TRIGGER claimed AFTER INSERT ON claims
          BEGIN INSERT INTO seen SELECT 'claimed', synchronous FROM pragma_synchronous; END;`)
      l.claim("o", ["a.json"], NOW)
      l.db.exec("DELETE FROM seen")
      const origin = { source: "nats://127.0.0.1:4222/?stream=S&consumer=c", address: "s.orders" }
      const landing = { name: "nats-S-1.json", attempts: 1, payloadHash: "0".repeat(64), deliveryId: "S:1", origin }
      expect(l.claimLanded("o", [landing], NOW).map((c) => c.name)).toEqual(["nats-S-1.json"])
      const landed = l.db.query("SELECT DISTINCT level FROM seen").all()
      l.db.exec("DELETE FROM seen")
      l.claim("o", ["b.json"], NOW)
      const claimed = l.db.query("SELECT DISTINCT level FROM seen").all()
      expect({ landed, claimed }).toEqual({ landed: [{ level: levels.landed }], claimed: [{ level: levels.claimed }] })
    },
  )
})

describe("Ledger.compact", () => {
  it("reads the claims in hand once when it forgets origins, not once for every origin", async () => {
    await using t = await tempLedger()
    const l = t.open()
    const plan = (l.db.query(`EXPLAIN QUERY PLAN ${statements.forgetOrigins}`).all() as { detail: string }[]).map(
      (r) => r.detail,
    )
    // claims has no index on claim_id: a correlated subquery over it would scan it per origin.
    expect(plan).toContain("LIST SUBQUERY 2")
    expect(plan.filter((d) => /^SCAN (c|claims)\b/.test(d))).toEqual(["SCAN claims"])
    expect(plan.filter((d) => d.startsWith("CORRELATED")).length).toBe(2)
    const at = (d: string) => plan.indexOf(d)
    expect(at("SCAN claims")).toBe(at("LIST SUBQUERY 2") + 1)
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
      "deletions",
      "duplicates",
      "failures",
      "horizon",
      "origins",
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
      expect(db.query("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get()).toEqual({ n: 10 })
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
