// How every command opens the SQLite ledger, end to end: a lost ledger beside a queue with
// history is refused rather than silently started over (which would apply redeliveries of
// processed messages again), so are symlinked ledger files; a -shm file left read-only by
// another user is named with its owner and mode; a ledger left open by a killed run is checked
// with quick_check before anything is claimed.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { list, pgUnavailable, repoRoot, run, spool, tempDatabase, tempDir, tempQueue } from "@spool/test-support"

const slow = 60_000
const noPostgres = await pgUnavailable()
if (noPostgres) console.warn(noPostgres)
const msg = (id: string, seq = 1) => ({ msg_id: id, order_no: "O", seq, amount: 1 })
const bin = (command: string) => join(repoRoot, "packages/consumer/bin", `${command}.ts`)

function processedCount(root: string): number {
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    return (db.query("SELECT count(*) AS n FROM processed").get() as { n: number }).n
  } finally {
    db.close()
  }
}

/** A queue consumed once (m-1 to done/, a parse failure to error/), whose ledger is then lost. */
async function queueWithLostLedger(state: "absent" | "empty") {
  const q = await tempQueue({ seed: { "m-1.json": msg("m-1"), "bad.json": "not json" } })
  expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
  expect(list(join(q.root, "done"))).toEqual(["m-1.json"])
  for (const f of list(q.root)) if (f.startsWith("ledger.db")) fs.rmSync(join(q.root, f))
  if (state === "empty") fs.writeFileSync(join(q.root, "ledger.db"), "")
  // The producer redelivers the message the lost ledger had processed.
  q.put("m-1-again.json", msg("m-1"))
  return q
}

/** A library program that opens the queue with createConsumer, as an application would. */
function libraryOpener(dir: string): string {
  const path = join(dir, "open.ts")
  fs.writeFileSync(
    path,
    `import { createConsumer } from ${JSON.stringify(join(repoRoot, "packages/core/src/index.ts"))}
try {
  createConsumer({ root: process.argv[2] }).close()
} catch (error) {
  process.stderr.write(\`\${error.message}\\n\`)
  process.exitCode = 2
}
`,
  )
  return path
}

describe("a new ledger beside a queue that has history", () => {
  it.each(["absent", "empty"] as const)(
    "is refused when ledger.db is %s: exit 2, nothing created, the redelivery left in inbox/; --new-ledger starts over",
    async (state) => {
      await using q = await queueWithLostLedger(state)
      const before = list(q.root)
      const r = await spool("consume", ["--root", q.root])
      expect(r.stdout).toBe("")
      const path = join(q.root, "ledger.db")
      expect(r.stderr).toContain(
        `consume: refusing to start a new ledger: ${path} ${state === "absent" ? "does not exist" : "is empty (0 bytes)"}, but ${join(q.root, "done")}/ holds files ("m-1.json" among them)`,
      )
      expect(r.stderr).toContain("a redelivery of a message already processed would be processed again")
      expect(r.stderr).toContain("Restore ledger.db from a backup")
      expect(r.stderr).toContain("--new-ledger")
      expect(r.exitCode).toBe(2)
      expect(list(q.root)).toEqual(before)
      if (state === "empty") expect(fs.statSync(path).size).toBe(0)
      expect(list(join(q.root, "inbox"))).toEqual(["m-1-again.json"])

      // Starting over on purpose: the redelivery is then processed a second time, as the flag says.
      const over = await spool("consume", ["--root", q.root, "--new-ledger"])
      expect(over.stderr).toContain("processed=1 duplicates=0")
      expect(over.exitCode).toBe(0)
      expect(list(join(q.root, "done"))).toEqual(["m-1-again.json", "m-1.json"])
    },
    slow,
  )

  it(
    "is refused by every command that would create it: consume --watch and --concurrency, compact, order-check, replay, the library",
    async () => {
      await using q = await queueWithLostLedger("absent")
      await using d = await tempDir()
      const before = list(q.root)
      const commands: [string, string[]][] = [
        ["consume --watch", ["bun", bin("consume"), "--root", q.root, "--watch"]],
        ["consume --concurrency 2", ["bun", bin("consume"), "--root", q.root, "--concurrency", "2"]],
        ["compact", ["bun", bin("compact"), "--root", q.root, "--older-than", "1d"]],
        ["order-check", ["bun", bin("order-check"), "--root", q.root]],
        ["replay", ["bun", join(repoRoot, "scripts/replay.ts"), "--root", q.root, "bad.json"]],
        ["createConsumer", ["bun", libraryOpener(d.path), q.root]],
      ]
      for (const [name, cmd] of commands) {
        const r = await run(cmd)
        expect([name, r.stdout]).toEqual([name, ""])
        expect([name, r.stderr.match(/refusing to start a new ledger/g)?.length]).toEqual([name, 1])
        expect([name, r.exitCode]).toEqual([name, 2])
        expect([name, list(q.root)]).toEqual([name, before])
      }
      expect(list(join(q.root, "error"))).toEqual(["bad.json"])
    },
    slow,
  )

  it(
    "is reported by stats, show, verify and a dry run of replay, which would otherwise show an empty, healthy queue",
    async () => {
      await using q = await queueWithLostLedger("absent")
      const before = list(q.root)
      const spoolBin = join(repoRoot, "packages/spool/bin/spool.ts")
      for (const command of [["stats"], ["show", "m-1"], ["verify"], ["replay", "--all", "--dry-run"]]) {
        const r = await run(["bun", spoolBin, ...command, "--root", q.root])
        expect([command[0], r.stderr.match(/refusing to start a new ledger/g)?.length]).toEqual([command[0], 1])
        expect([command[0], r.exitCode]).toEqual([command[0], 2])
      }
      expect(list(q.root)).toEqual(before)
    },
    slow,
  )

  it(
    "is refused when only error/ holds files",
    async () => {
      await using q = await tempQueue({ seed: { "bad.json": "not json" } })
      expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
      expect(list(join(q.root, "done"))).toEqual([])
      fs.rmSync(join(q.root, "ledger.db"))
      q.put("m-3.json", msg("m-3", 3))
      const r = await spool("consume", ["--root", q.root])
      expect(r.stderr).toContain(`${join(q.root, "error")}/ holds files ("bad.json" among them)`)
      expect(r.exitCode).toBe(2)
      expect(list(join(q.root, "inbox"))).toEqual(["m-3.json"])
    },
    slow,
  )

  it(
    "is refused once retention emptied done/: by the files compact archived, then by the root's binding record",
    async () => {
      await using q = await tempQueue({ seed: { "x.json": msg("x") } })
      expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
      await Bun.sleep(20)
      expect((await spool("compact", ["--root", q.root, "--older-than", "1ms"])).exitCode).toBe(0)
      expect(list(join(q.root, "done"))).toEqual([])
      for (const f of list(q.root)) if (f.startsWith("ledger.db")) fs.rmSync(join(q.root, f))
      q.put("x-again.json", msg("x"))
      const archived = await spool("consume", ["--root", q.root])
      expect(archived.stderr).toContain(`but ${join(q.root, "archive")}/ holds files`)
      expect(archived.exitCode).toBe(2)
      // A retention job that removes the archive too leaves the binding record, written once the ledger existed.
      fs.rmSync(join(q.root, "archive"), { recursive: true })
      const bound = await spool("consume", ["--root", q.root])
      expect(bound.stderr).toContain(
        `but ${join(q.root, ".spool", "ledger")} records that this root is bound to its SQLite ledger (made by an earlier run, or bound by setup --rebind), so an earlier ledger may have recorded`,
      )
      expect(bound.exitCode).toBe(2)
      expect(list(join(q.root, "inbox"))).toEqual(["x-again.json"])
      expect(list(q.root)).not.toContain("ledger.db")
    },
    slow,
  )

  it.skipIf(noPostgres !== undefined)(
    "is refused for a root consumed into PostgreSQL and run without its URL, which still works with it",
    async () => {
      await using db = await tempDatabase()
      await using q = await tempQueue({ seed: { "m-1.json": msg("m-1") } })
      expect((await spool("consume", ["--root", q.root, "--ledger", db.url])).exitCode).toBe(0)
      expect(list(q.root)).toContain(".spool-root-id")
      expect(list(q.root)).not.toContain("ledger.db")
      q.put("m-1-again.json", msg("m-1"))
      const r = await spool("consume", ["--root", q.root], { SPOOL_LEDGER_URL: "" })
      expect(r.stdout).toBe("")
      expect(r.stderr).toContain(`this root (${q.root}) is bound to the PostgreSQL ledger ${db.url}`)
      expect(r.stderr).toContain("set SPOOL_LEDGER_URL or pass --ledger")
      expect(r.exitCode).toBe(2)
      expect(list(q.root)).not.toContain("ledger.db")
      const ok = await spool("consume", ["--root", q.root], { SPOOL_LEDGER_URL: db.url })
      expect(ok.stderr).toContain("processed=0 duplicates=1")
      expect(ok.exitCode).toBe(0)
    },
    slow,
  )
})

describe("ledger files that are not files", () => {
  it.each(["a FIFO", "a directory"])(
    "refuses a ledger.db that is %s with exit 2, opening nothing",
    async (kind) => {
      await using q = await tempQueue({ seed: { "m-1.json": msg("m-1") } })
      const path = join(q.root, "ledger.db")
      if (kind === "a FIFO") expect(Bun.spawnSync(["mkfifo", path]).exitCode).toBe(0)
      else fs.mkdirSync(path)
      const r = await spool("consume", ["--root", q.root])
      expect(r.stderr).toBe(
        `consume: ${path} is ${kind}, not a file; spool keeps its ledger in regular files in the queue root. Nothing was opened. With no consumer running, move it aside and restore the ledger from a backup\n`,
      )
      expect(r.exitCode).toBe(2)
      expect(list(join(q.root, "inbox"))).toEqual(["m-1.json"])
    },
    slow,
  )

  it(
    "refuses a .spool that is a symbolic link, writing no binding record through it, and a FIFO as the record, without waiting on it",
    async () => {
      await using q = await tempQueue({ seed: { "m-1.json": msg("m-1") } })
      await using outside = await tempDir()
      fs.symlinkSync(outside.path, join(q.root, ".spool"))
      const linked = await spool("consume", ["--root", q.root])
      expect(linked.stderr).toContain(
        `consume: ${join(q.root, ".spool")} is a symbolic link; spool keeps a root's binding record`,
      )
      expect(linked.exitCode).toBe(2)
      expect(list(outside.path)).toEqual([])
      fs.rmSync(join(q.root, ".spool"))
      expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
      const record = join(q.root, ".spool", "ledger")
      fs.rmSync(record)
      expect(Bun.spawnSync(["mkfifo", record]).exitCode).toBe(0)
      const fifo = await spool("consume", ["--root", q.root])
      expect(fifo.stderr).toContain(`consume: ${record} is not a regular file; spool keeps a root's binding record`)
      expect(fifo.exitCode).toBe(2)
    },
    slow,
  )
})

describe("symlinked ledger files", () => {
  it.each(["ledger.db", "ledger.db-wal", "ledger.db-shm"])(
    "refuses a symlinked %s with exit 2 and writes nothing outside the root",
    async (name) => {
      await using q = await tempQueue({ seed: { "m-1.json": msg("m-1") } })
      await using outside = await tempDir()
      expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
      const link = join(q.root, name)
      const target = join(outside.path, name)
      if (name === "ledger.db") fs.renameSync(link, target)
      fs.symlinkSync(target, link)
      const targetBefore = fs.existsSync(target) ? fs.readFileSync(target) : undefined
      q.put("m-2.json", msg("m-2", 2))
      const r = await spool("consume", ["--root", q.root])
      expect(r.stdout).toBe("")
      expect(r.stderr).toContain(`consume: ${link} is a symbolic link (to ${target})`)
      expect(r.stderr).toContain("does not follow links for them")
      expect(r.exitCode).toBe(2)
      expect(list(outside.path)).toEqual(name === "ledger.db" ? ["ledger.db"] : [])
      if (targetBefore !== undefined) expect(fs.readFileSync(target)).toEqual(targetBefore)
      expect(list(join(q.root, "inbox"))).toEqual(["m-2.json"])
    },
    slow,
  )
})

const canSwitchUser = process.getuid?.() === 0 && Bun.which("setpriv") !== null
if (!canSwitchUser) console.warn("ledger-open.test: skipping the other-user test: it needs root and setpriv")

describe.skipIf(!canSwitchUser)("a ledger.db-shm left read-only by another user", () => {
  it(
    "exits 3 naming the -shm file, its owner and mode, and what to do; once removed the same run works",
    async () => {
      await using q = await tempQueue({ seed: { "m-1.json": msg("m-1") } })
      expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
      // The queue belongs to nobody, but an earlier run as root left its WAL index behind, 0444.
      fs.chmodSync(q.path, 0o755)
      q.put("m-2.json", msg("m-2", 2))
      Bun.spawnSync(["chown", "-R", "65534:65534", q.root])
      const shm = join(q.root, "ledger.db-shm")
      fs.writeFileSync(shm, "")
      fs.chmodSync(shm, 0o444)
      const asNobody = () =>
        run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bun", bin("consume"), "--root", q.root])
      const r = await asNobody()
      expect(r.stdout).toBe("")
      expect(r.stderr).toContain(
        `consume: the ledger ${join(q.root, "ledger.db")} is writable, but ${shm}, SQLite's WAL index`,
      )
      expect(r.stderr).toContain(
        "running as nobody (uid 65534), so SQLite can only read the ledger: it is owned by root (uid 0) with mode 0444",
      )
      expect(r.stderr).toContain(
        `With no consumer running on this root, give this user write access to it (chown nobody ${shm}`,
      )
      expect(r.stderr).toContain(`or remove it (rm ${shm}`)
      expect(r.exitCode).toBe(3)
      expect(list(join(q.root, "inbox"))).toEqual(["m-2.json"])

      fs.rmSync(shm)
      const again = await asNobody()
      expect(again.stderr).toContain("processed=1")
      expect(again.exitCode).toBe(0)
      expect(list(join(q.root, "done"))).toEqual(["m-1.json", "m-2.json"])
    },
    slow,
  )
})

/** Overwrites the cell count of table `table`'s root page on disk: its cells then point nowhere. */
function damageTable(ledger: string, table: string): void {
  const db = new Database(ledger)
  const { rootpage } = db.query("SELECT rootpage FROM sqlite_master WHERE name = ?").get(table) as { rootpage: number }
  const { page_size } = db.query("PRAGMA page_size").get() as { page_size: number }
  db.close()
  expect(fs.existsSync(`${ledger}-wal`)).toBe(false)
  const fd = fs.openSync(ledger, "r+")
  try {
    fs.writeSync(fd, Buffer.from([0x00, 0x05]), 0, 2, (rootpage - 1) * page_size + 3)
  } finally {
    fs.closeSync(fd)
  }
}

describe("a ledger not closed cleanly", () => {
  it(
    "is checked with quick_check before anything is claimed: damage found exits 3, names the ledger and bun run verify",
    async () => {
      await using q = await tempQueue({ seed: { "m-1.json": msg("m-1") } })
      expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
      // The replays table, which consume never reads, is damaged on disk; then a run is killed
      // after claiming m-2, and its -wal stays behind, as after any crash.
      const ledger = join(q.root, "ledger.db")
      damageTable(ledger, "replays")
      q.put("m-2.json", msg("m-2", 2))
      const killed = await spool("consume", ["--root", q.root], { SPOOL_FAULT: "after-claim" })
      expect(killed.exitCode).not.toBe(0)
      expect(list(q.root)).toContain("ledger.db-wal")
      q.put("m-3.json", msg("m-3", 3))
      const r = await spool("consume", ["--root", q.root])
      expect(r.stdout).toBe("")
      expect(r.stderr).toContain(`consume: the ledger ${ledger} is damaged (PRAGMA quick_check reported: Tree `)
      expect(r.stderr).toContain(`run bun run verify --root ${q.root}`)
      expect(r.stderr).toContain("restore ledger.db from a backup")
      expect(r.exitCode).toBe(3)
      expect(list(join(q.root, "inbox"))).toEqual(["m-3.json"])
      expect(list(join(q.root, "processing"))).toEqual(["m-2.json"])
      expect(list(join(q.root, "done"))).toEqual(["m-1.json"])
    },
    slow,
  )

  it(
    "is left as it was by the commands that only read it, so that the next consume still checks it",
    async () => {
      await using q = await tempQueue({ seed: { "m-1.json": msg("m-1") } })
      expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
      q.put("m-2.json", msg("m-2", 2))
      expect((await spool("consume", ["--root", q.root], { SPOOL_FAULT: "after-claim" })).exitCode).not.toBe(0)
      const ledger = join(q.root, "ledger.db")
      const before = [fs.readFileSync(ledger), fs.readFileSync(`${ledger}-wal`)]
      const spoolBin = join(repoRoot, "packages/spool/bin/spool.ts")
      for (const command of [["stats"], ["list", "done"], ["show", "m-1"], ["verify"], ["order-check"]]) {
        const r = await run(["bun", spoolBin, ...command, "--root", q.root])
        expect(r.exitCode, `${command.join(" ")}: ${r.stderr}`).toBeLessThan(2)
      }
      // A reader that closed last used to checkpoint the WAL into ledger.db and delete -wal.
      expect(fs.readFileSync(ledger).equals(before[0] as Buffer)).toBe(true)
      expect(fs.readFileSync(`${ledger}-wal`).equals(before[1] as Buffer)).toBe(true)
    },
    slow,
  )

  it(
    "is not checked after a clean close: quick_check costs a read of every page, so damage there waits for verify",
    async () => {
      await using q = await tempQueue({ seed: { "m-1.json": msg("m-1") } })
      expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
      damageTable(join(q.root, "ledger.db"), "replays")
      // A reader in between leaves an empty -wal it may not delete: no sign of an unfinished run.
      expect((await run(["bun", bin("stats"), "--root", q.root])).exitCode).toBe(0)
      q.put("m-2.json", msg("m-2", 2))
      const r = await spool("consume", ["--root", q.root])
      expect(r.stderr).toContain("processed=1")
      expect(r.exitCode).toBe(0)
      expect(processedCount(q.root)).toBe(2)
      const v = await run(["bun", bin("verify"), "--root", q.root])
      expect(v.stdout).toContain("FAILED   integrity")
      expect(v.exitCode).toBe(1)
    },
    slow,
  )
})
