// Operational faults: a read-only ledger, a ledger locked past the busy timeout, a full disk,
// a queue directory the consumer may not write to. Each run must fail loudly (exit 3, a message
// that says what to do) and lose nothing: every message is in inbox/, done/ or error/, or waits
// in processing/ with its claim for the next start to finish, which then ends as a clean run.
import { Database } from "bun:sqlite"
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import {
  consumeBounded,
  diffSnapshots,
  ledgerRows,
  queueListing,
  requireTool,
  run,
  snapshot,
  tempDir,
  tempQueue,
} from "@spool/test-support"

const slow = 60_000
const msg = (i: number, pad = "") =>
  JSON.stringify({ msg_id: `m${i}`, order_no: `o${i % 7}`, seq: Math.floor(i / 7) + 1, amount: 1.25, pad })

/** Puts `n` messages m0..m(n-1) into inbox/. */
function fill(root: string, n: number, pad = ""): void {
  for (let i = 0; i < n; i++) fs.writeFileSync(join(root, "inbox", `m${i}.json`), msg(i, pad))
}

/** No message lost: every input is in inbox/ or done/, each done/ file has its processed row. */
function expectNothingLost(root: string, n: number): void {
  const l = queueListing(root)
  expect(l.processing).toEqual([])
  expect(l.error).toEqual([])
  expect([...l.inbox, ...l.done].sort()).toEqual(Array.from({ length: n }, (_, i) => `m${i}.json`).sort())
  const processed = ledgerRows(root).processed
  expect([...processed.values()].map((r) => r.file).sort()).toEqual(l.done)
}

/**
 * The promise after exit 3: every message is in inbox/, done/ or error/, or waits in
 * processing/ with its claim row, a committed one with its outcome recorded; the message
 * says how many wait. Read once the cause is gone (a WAL reader needs room for its -shm).
 */
function expectLeftForRecovery(root: string, stderr: string): void {
  const waiting = queueListing(root).processing
  // The count the message gives is the count that waits.
  if (stderr.includes("nothing is lost:"))
    expect(stderr).toContain(
      waiting.length === 0 ? "nothing is lost: no file of this run waits" : `nothing is lost: ${waiting.length} file`,
    )
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    const claims = new Map(
      (
        db.query("SELECT name, state, claim_id FROM claims").all() as {
          name: string
          state: string
          claim_id: string
        }[]
      ).map((c) => [c.name, c]),
    )
    const recorded = new Set(
      (
        db
          .query(
            "SELECT claim_id FROM processed UNION ALL SELECT claim_id FROM duplicates UNION ALL SELECT claim_id FROM failures",
          )
          .all() as { claim_id: string }[]
      ).map((r) => r.claim_id),
    )
    for (const name of waiting) {
      const c = claims.get(name)
      expect([name, c !== undefined]).toEqual([name, true])
      if (c?.state === "committed") expect([name, recorded.has(c.claim_id)]).toEqual([name, true])
    }
  } finally {
    db.close()
  }
}

/** The test that holds the ledger's lock from the sqlite3 shell, as an operator would. */
const itWithSqlite3 = requireTool("sqlite3", "apt-get install sqlite3")

/** Runs `cmd` and says whether it worked (for probing what this machine allows). */
const works = (cmd: string[]) => Bun.spawnSync(cmd, { stdout: "ignore", stderr: "ignore" }).exitCode === 0

// chattr +i makes a file immutable even for root, which plain chmod 0444 does not.
const canChattr = (() => {
  const probe = fs.mkdtempSync(join(os.tmpdir(), "spool-chattr-"))
  try {
    const f = join(probe, "f")
    fs.writeFileSync(f, "")
    const ok = works(["chattr", "+i", f])
    if (ok) works(["chattr", "-i", f])
    return ok
  } finally {
    fs.rmSync(probe, { recursive: true, force: true })
  }
})()
if (!canChattr)
  console.warn("faults.test: skipping read-only ledger tests: chattr +i is not available or not permitted here")

describe.skipIf(!canChattr)("a read-only ledger", () => {
  it(
    "exits 3 saying to grant write access, and leaves every message in inbox/ when the ledger file is immutable",
    async () => {
      await using q = await tempQueue()
      expect((await consumeBounded(q.root)).exitCode).toBe(0)
      fill(q.root, 5)
      const ledger = join(q.root, "ledger.db")
      expect(works(["chattr", "+i", ledger])).toBe(true)
      let r: Awaited<ReturnType<typeof consumeBounded>>
      try {
        // As root, chmod alone would not stop the write: prove the file really is read-only.
        expect(() => fs.appendFileSync(ledger, "x")).toThrow()
        r = await consumeBounded(q.root)
      } finally {
        works(["chattr", "-i", ledger])
      }
      expect(r.stdout).toBe("")
      expect(r.stderr).toContain("read-only")
      expect(r.stderr).toContain("write access")
      expect(r.exitCode).toBe(3)
      expectNothingLost(q.root, 5)
      expect(queueListing(q.root).inbox).toHaveLength(5)
      // Once writable again, the same command finishes the work.
      expect((await consumeBounded(q.root)).exitCode).toBe(0)
      expect(queueListing(q.root).done).toHaveLength(5)
    },
    slow,
  )

  it(
    "exits 3 saying to grant write access when the queue root directory is immutable",
    async () => {
      await using q = await tempQueue()
      expect((await consumeBounded(q.root)).exitCode).toBe(0)
      fill(q.root, 5)
      for (const f of fs.readdirSync(q.root)) if (f.startsWith("ledger.db-")) fs.rmSync(join(q.root, f))
      expect(works(["chattr", "+i", q.root])).toBe(true)
      let r: Awaited<ReturnType<typeof consumeBounded>>
      try {
        r = await consumeBounded(q.root)
      } finally {
        works(["chattr", "-i", q.root])
      }
      expect(r.stderr).toContain("write access")
      expect(r.stderr).not.toContain("unexpected failure")
      expect(r.exitCode).toBe(3)
      expectNothingLost(q.root, 5)
    },
    slow,
  )
})

describe("a ledger locked for longer than the busy timeout", () => {
  it(
    "exits 3 naming the lock and --busy-timeout, moves nothing, and finishes once the lock is gone",
    async () => {
      await using q = await tempQueue()
      expect((await consumeBounded(q.root)).exitCode).toBe(0)
      fill(q.root, 5)
      const holder = new Database(join(q.root, "ledger.db"))
      let r: Awaited<ReturnType<typeof consumeBounded>>
      try {
        holder.exec("PRAGMA journal_mode = WAL")
        holder.exec("BEGIN IMMEDIATE")
        r = await consumeBounded(q.root, ["--busy-timeout", "200ms"])
      } finally {
        holder.exec("ROLLBACK")
        holder.close()
      }
      expect(r.stderr).toContain("locked")
      expect(r.stderr).toContain("--busy-timeout")
      expect(r.exitCode).toBe(3)
      expectNothingLost(q.root, 5)
      expect(queueListing(q.root).inbox).toHaveLength(5)
      const again = await consumeBounded(q.root, ["--busy-timeout", "200ms"])
      expect(again.exitCode).toBe(0)
      expect(queueListing(q.root).done).toHaveLength(5)
      expect(ledgerRows(q.root).processed.size).toBe(5)
    },
    slow,
  )

  it(
    "exits 3 when the lock is taken mid-run, with every message in inbox/ or committed in done/",
    async () => {
      await using q = await tempQueue()
      expect((await consumeBounded(q.root)).exitCode).toBe(0)
      const n = 2000
      fill(q.root, n)
      const consumer = consumeBounded(q.root, ["--batch-size", "1", "--busy-timeout", "200ms", "--no-fsync"])
      const holder = new Database(join(q.root, "ledger.db"))
      let r: Awaited<ReturnType<typeof consumeBounded>>
      try {
        holder.exec("PRAGMA busy_timeout = 20000")
        // Poll with a bound for the first committed file, then take the write lock between batches.
        const done = join(q.root, "done")
        for (const start = Date.now(); fs.readdirSync(done).length === 0; await Bun.sleep(2))
          if (Date.now() - start > 30_000) throw new Error("consume never finished a first message")
        holder.exec("BEGIN IMMEDIATE")
        r = await consumer
      } finally {
        if (holder.inTransaction) holder.exec("ROLLBACK")
        holder.close()
      }
      expect(r.stderr).toContain("locked")
      expect(r.exitCode).toBe(3)
      expectNothingLost(q.root, n)
      const l = queueListing(q.root)
      expect(l.done.length).toBeGreaterThan(0)
      expect(l.inbox.length).toBeGreaterThan(0)
      const again = await consumeBounded(q.root, ["--no-fsync"])
      expect(again.exitCode).toBe(0)
      expectNothingLost(q.root, n)
      expect(queueListing(q.root).done).toHaveLength(n)
      expect(fs.readFileSync(join(q.root, "dup.txt"), "utf8")).toBe("")
    },
    slow,
  )

  itWithSqlite3(
    "also gives up when the lock is held by a sqlite3 process",
    async () => {
      await using q = await tempQueue()
      expect((await consumeBounded(q.root)).exitCode).toBe(0)
      fill(q.root, 3)
      const sqlite = Bun.spawn(["sqlite3", join(q.root, "ledger.db")], {
        stdin: "pipe",
        stdout: "pipe",
        stderr: "pipe",
      })
      try {
        sqlite.stdin.write("BEGIN IMMEDIATE;\nSELECT 'locked';\n")
        await sqlite.stdin.flush()
        // Wait for the shell to say it holds the lock (bounded by the test timeout, not a sleep).
        const reader = sqlite.stdout.getReader()
        let seen = ""
        while (!seen.includes("locked")) {
          const { value, done } = await reader.read()
          if (done) break
          seen += new TextDecoder().decode(value)
        }
        reader.releaseLock()
        expect(seen).toContain("locked")
        const r = await consumeBounded(q.root, ["--busy-timeout", "200ms"])
        expect(r.stderr).toContain("locked")
        expect(r.exitCode).toBe(3)
        expectNothingLost(q.root, 3)
      } finally {
        sqlite.kill()
        await sqlite.exited
      }
    },
    slow,
  )
})

describe.skipIf(!canChattr)("a done/ directory this consumer may not write to", () => {
  it(
    "exits 3 naming the permission problem, leaves the committed files to recovery, and ends as a clean run once fixed",
    async () => {
      await using ref = await tempQueue()
      await using q = await tempQueue()
      for (const root of [ref.root, q.root]) {
        fill(root, 60)
        fs.writeFileSync(join(root, "inbox", "bad.json"), "{ not json")
      }
      const args = ["--batch-size", "10"]
      expect((await consumeBounded(ref.root, args)).exitCode).toBe(0)
      // Immutable: even root cannot add a name to it, as a user without write access cannot.
      expect(works(["chattr", "+i", join(q.root, "done")])).toBe(true)
      let r: Awaited<ReturnType<typeof consumeBounded>>
      try {
        r = await consumeBounded(q.root, args)
      } finally {
        works(["chattr", "-i", join(q.root, "done")])
      }
      expect(r.stderr).toContain("permission denied (EPERM)")
      expect(r.stderr).toContain(`may not change ${join(q.root, "processing")} and ${join(q.root, "done")}`)
      expect(r.stderr).not.toContain("errno")
      expect(r.stderr).not.toContain("unexpected failure")
      expect(r.exitCode).toBe(3)
      expect(queueListing(q.root).processing.length).toBeGreaterThan(0)
      expectLeftForRecovery(q.root, r.stderr)

      const again = await consumeBounded(q.root, args)
      expect(again.stderr).toContain("committed, not yet moved")
      expect(again.exitCode).toBe(0)
      expect(diffSnapshots(snapshot(ref.root), snapshot(q.root))).toEqual([])
    },
    slow,
  )
})

// A small tmpfs as the queue root: real ENOSPC, on this machine, for root only. The probe mounts
// and unmounts at once; the real mount lives only while the describe block runs.
const mountTmpfs = (at: string) => works(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", at])
const canMount = (() => {
  const probe = fs.mkdtempSync(join(os.tmpdir(), "spool-tmpfs-probe-"))
  try {
    return mountTmpfs(probe) && works(["umount", probe])
  } finally {
    fs.rmSync(probe, { recursive: true, force: true })
  }
})()
if (!canMount)
  console.warn("faults.test: skipping disk-full tests: cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN)")

describe.skipIf(!canMount)("a full disk", () => {
  const mountPoint = join(os.tmpdir(), `spool-tmpfs-${process.pid}-${Date.now()}`)
  const root = join(mountPoint, "q")
  const filler = join(mountPoint, "filler")

  /** Fills the filesystem, then frees `leave` bytes (tmpfs gives pages back on truncate). */
  function fillDisk(leave: number): void {
    const fd = fs.openSync(filler, "w")
    const chunk = Buffer.alloc(64 * 1024)
    try {
      for (;;) fs.writeSync(fd, chunk)
    } catch (error) {
      expect((error as NodeJS.ErrnoException).code).toBe("ENOSPC")
    }
    fs.ftruncateSync(fd, Math.max(0, fs.fstatSync(fd).size - leave))
    fs.closeSync(fd)
  }

  function freshQueue(): void {
    for (const e of fs.readdirSync(mountPoint)) fs.rmSync(join(mountPoint, e), { recursive: true, force: true })
    for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
  }

  beforeAll(() => {
    fs.mkdirSync(mountPoint)
    expect(mountTmpfs(mountPoint)).toBe(true)
    freshQueue()
  })
  afterAll(() => {
    const isUnmounted = works(["umount", mountPoint])
    if (isUnmounted) fs.rmSync(mountPoint, { recursive: true, force: true })
    expect(isUnmounted).toBe(true)
  })

  it(
    "stops with exit 3 and 'free space' mid-run, with each message in inbox/ or committed in done/, and finishes after space is freed",
    async () => {
      freshQueue()
      expect((await consumeBounded(root)).exitCode).toBe(0)
      const n = 200
      fill(root, n, "x".repeat(600))
      // Far less room than the ledger's write-ahead log needs for 20 batches.
      fillDisk(160 * 1024)
      const r = await consumeBounded(root, ["--batch-size", "10"])
      expect(r.stderr).toMatch(/full|free space|df/)
      expect(r.stderr).not.toContain("unexpected failure")
      expect(r.exitCode).toBe(3)
      expectNothingLost(root, n)
      expect(queueListing(root).inbox.length).toBeGreaterThan(0)

      fs.rmSync(filler)
      const again = await consumeBounded(root, ["--batch-size", "10"])
      expect(again.exitCode).toBe(0)
      expectNothingLost(root, n)
      expect(queueListing(root).done).toHaveLength(n)
      expect(ledgerRows(root).processed.size).toBe(n)
      expect(fs.readFileSync(join(root, "dup.txt"), "utf8")).toBe("")
    },
    slow,
  )

  it(
    "at any amount of free space, exits 3 leaving each message in inbox/, done/, error/ or to recovery, and ends as a clean run once freed",
    async () => {
      const n = 600
      const args = ["--batch-size", "10"]
      await using ref = await tempQueue()
      fill(ref.root, n)
      fs.writeFileSync(join(ref.root, "inbox", "bad.json"), "{ not json")
      expect((await consumeBounded(ref.root, args)).exitCode).toBe(0)
      const expected = snapshot(ref.root)
      // Room for the whole run once freed: 600 files and the write-ahead log of 60 batches.
      expect(works(["mount", "-o", "remount,size=64m", mountPoint])).toBe(true)
      const failedAt: number[] = []
      try {
        for (const free of [16, 64, 200, 400, 800, 1500].map((k) => k * 1024)) {
          freshQueue()
          expect((await consumeBounded(root)).exitCode).toBe(0)
          fill(root, n)
          fs.writeFileSync(join(root, "inbox", "bad.json"), "{ not json")
          fillDisk(free)
          const r = await consumeBounded(root, args)
          fs.rmSync(filler)
          expect([free, r.stderr]).not.toEqual([free, expect.stringContaining("unexpected failure")])
          if (r.exitCode !== 0) {
            failedAt.push(free)
            expect([free, r.exitCode]).toEqual([free, 3])
            expect(r.stderr).toMatch(/full|free space|df/)
            expectLeftForRecovery(root, r.stderr)
            const again = await consumeBounded(root, args)
            expect([free, again.exitCode, again.stderr]).toEqual([free, 0, again.stderr])
          }
          expect([free, diffSnapshots(expected, snapshot(root))]).toEqual([free, []])
        }
      } finally {
        freshQueue()
        works(["mount", "-o", "remount,size=4m", mountPoint])
      }
      // The disk did fill up mid-run, at the smallest amounts at least.
      expect(failedAt).toContain(16 * 1024)
    },
    slow,
  )

  it(
    "exits 3 before touching anything when the disk is already completely full",
    async () => {
      freshQueue()
      expect((await consumeBounded(root)).exitCode).toBe(0)
      fill(root, 20)
      fillDisk(0)
      const r = await consumeBounded(root)
      expect(r.stderr).toMatch(/full|free space|df/)
      expect(r.stderr).not.toContain("unexpected failure")
      expect(r.exitCode).toBe(3)
      expect(queueListing(root).inbox).toHaveLength(20)
      // Even a reader needs room for the ledger's shared-memory file.
      fs.rmSync(filler)
      expectNothingLost(root, 20)
    },
    slow,
  )

  it(
    "makes enqueue fail with exit 3 and leave nothing half-written in inbox/ or tmp/",
    async () => {
      freshQueue()
      await using src = await tempDir()
      const big = join(src.path, "big.json")
      fs.writeFileSync(
        big,
        JSON.stringify({ msg_id: "big", order_no: "o", seq: 1, amount: 1, pad: "x".repeat(1 << 20) }),
      )
      fillDisk(256 * 1024)
      const r = await run(["bun", "run", "enqueue", "--root", root, big])
      fs.rmSync(filler)
      expect(r.stdout).toBe("")
      expect(r.stderr).toContain("full")
      expect(r.exitCode).toBe(3)
      expect(fs.readdirSync(join(root, "inbox"))).toEqual([])
      expect(fs.readdirSync(join(root, "tmp"))).toEqual([])
    },
    slow,
  )
})
