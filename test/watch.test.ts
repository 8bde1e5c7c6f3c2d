import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { childPids, list, repoRoot, spool, tempQueue } from "@spool/test-support"

const consumeBin = join(repoRoot, "packages/consumer/bin/consume.ts")

/** A `consume --watch` process whose stderr is collected as it arrives. */
interface Watcher extends AsyncDisposable {
  readonly proc: Bun.Subprocess<"ignore", "pipe", "pipe">
  readonly stderr: () => string
  /** Sends a signal and returns the exit code once the process and its output have ended. */
  stop(signal?: NodeJS.Signals): Promise<number>
}

function startWatch(root: string, args: readonly string[], env: Record<string, string> = {}): Watcher {
  const proc = Bun.spawn(["bun", consumeBin, "--root", root, "--watch", ...args], {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  })
  let stderr = ""
  const decoder = new TextDecoder()
  const reading = (async () => {
    for await (const chunk of proc.stderr) stderr += decoder.decode(chunk, { stream: true })
  })()
  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    proc.kill(signal)
    const code = await proc.exited
    await reading
    return code
  }
  return {
    proc,
    stderr: () => stderr,
    stop,
    async [Symbol.asyncDispose]() {
      if (proc.exitCode === null && proc.signalCode === null) await stop("SIGKILL")
    },
  }
}

/** Polls `condition` until it holds, failing after a generous bound (not a speed assumption). */
async function until(condition: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await Bun.sleep(20)
  }
}

const message = (id: string, seq = 1) => JSON.stringify({ msg_id: id, order_no: "O-1", seq, amount: 10.5 })

/** Writes a message the way a careful producer does: into tmp/, then one rename into inbox/. */
function dropAtomically(root: string, name: string, content: string) {
  fs.writeFileSync(join(root, "tmp", name), content)
  fs.renameSync(join(root, "tmp", name), join(root, "inbox", name))
}

function ledgerCount(root: string, sql: string): number {
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    return (db.query(sql).get() as { n: number }).n
  } finally {
    db.close()
  }
}

const read = (path: string) => (fs.existsSync(path) ? fs.readFileSync(path, "utf8") : "")

describe("consume --watch", () => {
  it("consumes files renamed into inbox/ while it runs, rewrites the reports, and stops cleanly on SIGTERM", async () => {
    await using q = await tempQueue()
    // An hour between rescans: only the first drain and file-system events can find these files.
    await using w = startWatch(q.root, ["--rescan", "1h"])
    await until(() => w.stderr().includes("msg=watching "), "the watcher to start")
    expect(w.stderr()).toContain("events=true")
    for (let i = 1; i <= 30; i++) dropAtomically(q.root, `m-${i}.json`, message(`m-${i}`, i))
    dropAtomically(q.root, "again.json", message("m-7", 7))
    dropAtomically(q.root, "broken.json", "{ not json")
    await until(() => list(join(q.root, "done")).length === 31, "31 files in done/")
    await until(() => read(join(q.root, "dup.txt")) === "m-7\n", "dup.txt to name the duplicate")
    await until(() => read(join(q.root, "error.csv")) === "file,reason\nbroken.json,parse\n", "error.csv")

    const code = await w.stop("SIGTERM")
    expect(w.stderr()).toContain("msg=stopping signal=SIGTERM")
    expect(w.stderr()).toMatch(/msg=done files=32 processed=30 duplicates=1 .*stopped="by signal"/)
    expect(code).toBe(0)
    expect(list(join(q.root, "processing"))).toEqual([])
    expect(list(join(q.root, "inbox"))).toEqual([])
    expect(list(join(q.root, "error"))).toEqual(["broken.json"])
    expect(ledgerCount(q.root, "SELECT count(*) AS n FROM processed")).toBe(30)
    expect(ledgerCount(q.root, "SELECT count(*) AS n FROM claims")).toBe(0)
  })

  it("takes files written in place once they are --min-age old, without waiting for a rescan", async () => {
    await using q = await tempQueue()
    await using w = startWatch(q.root, ["--rescan", "1h", "--min-age", "300ms"])
    await until(() => w.stderr().includes("msg=watching "), "the watcher to start")
    fs.writeFileSync(join(q.root, "inbox", "plain-1.json"), message("plain-1"))
    fs.writeFileSync(join(q.root, "inbox", "plain-2.json"), message("plain-2", 2))
    await until(() => list(join(q.root, "done")).length === 2, "both files in done/")
    expect(await w.stop("SIGINT")).toBe(0)
    expect(list(join(q.root, "done"))).toEqual(["plain-1.json", "plain-2.json"])
    expect(list(join(q.root, "processing"))).toEqual([])
  })

  it("takes a file too young for its first drain once it is --min-age old, though its event came before", async () => {
    // Written before the watcher starts: no event will ever come for it, and the first drain
    // finds it younger than --min-age. Only the drain's own count of files left can bring it.
    await using q = await tempQueue({ seed: { "early.json": message("early") } })
    await using w = startWatch(q.root, ["--rescan", "1h", "--min-age", "2s"])
    await until(() => list(join(q.root, "done")).includes("early.json"), "early.json in done/")
    expect(await w.stop()).toBe(0)
  })

  it("finds files by rescanning when file-system events are missed", async () => {
    await using q = await tempQueue({ seed: { "first.json": message("first") } })
    await using w = startWatch(q.root, ["--rescan", "200ms"], { SPOOL_WATCH_NO_EVENTS: "1" })
    // After the first drain has ended, nothing but a rescan can see the next file.
    await until(() => w.stderr().includes("msg=drained files=1"), "the first drain")
    expect(w.stderr()).toContain("events=false")
    dropAtomically(q.root, "late.json", message("late", 2))
    await until(() => list(join(q.root, "done")).includes("late.json"), "late.json in done/")
    expect(await w.stop()).toBe(0)
    expect(list(join(q.root, "done"))).toEqual(["first.json", "late.json"])
  })

  it("stops with exit 2, moving nothing out of the root, once a queue directory is replaced by a link while it runs", async () => {
    await using q = await tempQueue({ seed: { "first.json": message("first") } })
    const outside = join(q.path, "outside")
    fs.mkdirSync(outside)
    await using w = startWatch(q.root, ["--rescan", "200ms"])
    await until(() => w.stderr().includes("msg=drained files=1"), "the first drain")
    fs.renameSync(join(q.root, "error"), join(q.path, "error-before"))
    fs.symlinkSync(outside, join(q.root, "error"))
    dropAtomically(q.root, "broken.json", "{ not json")
    const code = await w.proc.exited
    expect(w.stderr()).toContain(`${q.root} changed under this run: error/ is a symbolic link now`)
    expect(code).toBe(2)
    expect(fs.readdirSync(outside)).toEqual([])
    expect(list(join(q.root, "inbox"))).toEqual(["broken.json"])
  })

  it("stops with exit 2 once the root it started on is swapped for another, recording nothing of the other", async () => {
    await using q = await tempQueue({ seed: { "first.json": message("first") } })
    await using other = await tempQueue({ seed: { "other.json": message("other") } })
    await using w = startWatch(q.root, ["--rescan", "200ms"])
    await until(() => w.stderr().includes("msg=drained files=1"), "the first drain")
    fs.renameSync(q.root, `${q.root}.orig`)
    fs.renameSync(other.root, q.root)
    const code = await w.proc.exited
    expect(w.stderr()).toContain(`${q.root} changed under this run: the root is another directory now`)
    expect(code).toBe(2)
    expect(list(join(q.root, "inbox"))).toEqual(["other.json"])
    fs.renameSync(q.root, other.root)
    fs.renameSync(`${q.root}.orig`, q.root)
  })

  it("takes a --rescan past what a timer can wait as the longest wait, not as none", async () => {
    await using q = await tempQueue()
    await using w = startWatch(q.root, ["--rescan", "30d", "-v"])
    await until(() => w.stderr().includes("msg=watching "), "the watcher to start")
    await Bun.sleep(500)
    expect(await w.stop()).toBe(0)
    // A timer past 2^31 ms fires at once: the watcher would drain in a loop, warning each time.
    expect(w.stderr()).not.toContain("TimeoutOverflowWarning")
  })

  it("recovers a file left in processing/ by a dead consumer on a later drain", async () => {
    await using q = await tempQueue()
    await using w = startWatch(q.root, ["--rescan", "200ms"])
    await until(() => w.stderr().includes("msg=watching "), "the watcher to start")
    // An orphan: in processing/ with no claim, as a consumer killed mid-batch on another ledger leaves it.
    fs.writeFileSync(join(q.root, "tmp", "orphan.json"), message("orphan"))
    fs.renameSync(join(q.root, "tmp", "orphan.json"), join(q.root, "processing", "orphan.json"))
    await until(() => list(join(q.root, "done")).includes("orphan.json"), "orphan.json in done/")
    expect(await w.stop()).toBe(0)
    expect(w.stderr()).toMatch(/level=warn msg=recovered file=orphan\.json/)
    expect(list(join(q.root, "processing"))).toEqual([])
  })

  for (const signal of ["SIGTERM", "SIGHUP"] as const)
    it(`on ${signal} in the middle of a backlog finishes the batch in hand and leaves every file in exactly one place`, async () => {
      const total = 600
      const seed = Object.fromEntries(
        Array.from({ length: total }, (_, i) => [`b-${i}.json`, message(`b-${i % 500}`, i + 1)]),
      )
      await using q = await tempQueue({ seed })
      await using w = startWatch(q.root, ["--batch-size", "5"])
      await until(() => list(join(q.root, "done")).length > 0, "the first batch in done/")
      const code = await w.stop(signal)
      expect(w.stderr()).toContain(`msg=stopping signal=${signal}`)
      expect(code).toBe(0)
      expect(list(join(q.root, "processing"))).toEqual([])
      const done = list(join(q.root, "done"))
      const inbox = list(join(q.root, "inbox"))
      expect(done.length + inbox.length).toBe(total)
      expect(new Set([...done, ...inbox]).size).toBe(total)
      const rows = ledgerCount(q.root, "SELECT count(*) AS n FROM processed")
      const dups = ledgerCount(q.root, "SELECT count(*) AS n FROM duplicates")
      expect(rows + dups).toBe(done.length)
      expect(ledgerCount(q.root, "SELECT count(*) AS n FROM claims")).toBe(0)
      expect(read(join(q.root, "dup.txt")).split("\n").filter(Boolean).length).toBe(
        ledgerCount(q.root, "SELECT count(DISTINCT msg_id) AS n FROM duplicates"),
      )
    })

  it("with --concurrency 2 runs two workers that share the queue and both stop on SIGTERM", async () => {
    const total = 200
    const seed = Object.fromEntries(Array.from({ length: total }, (_, i) => [`c-${i}.json`, message(`c-${i}`, i + 1)]))
    await using q = await tempQueue({ seed })
    await using w = startWatch(q.root, ["--concurrency", "2", "--batch-size", "10"])
    await until(() => /worker=1/.test(w.stderr()) && /worker=2/.test(w.stderr()), "both workers to log")
    await until(() => list(join(q.root, "done")).length === total, `${total} files in done/`)
    const code = await w.stop("SIGTERM")
    expect(w.stderr()).toMatch(/msg=watching .*worker=1/)
    expect(w.stderr()).toMatch(/msg=watching .*worker=2/)
    expect(w.stderr().match(/msg=done .*stopped="by signal"/g)).toHaveLength(2)
    expect(code).toBe(0)
    expect(list(join(q.root, "processing"))).toEqual([])
    expect(ledgerCount(q.root, "SELECT count(*) AS n FROM processed")).toBe(total)
    expect(ledgerCount(q.root, "SELECT count(*) AS n FROM duplicates")).toBe(0)
  })

  it("with --concurrency 2, a worker killed while watching is reported at once and the run ends with exit 3", async () => {
    await using q = await tempQueue({ seed: { "first.json": message("first") } })
    await using w = startWatch(q.root, ["--concurrency", "2"])
    await until(
      () => /msg=watching .*worker=1/.test(w.stderr()) && /msg=watching .*worker=2/.test(w.stderr()),
      "both workers to watch",
    )
    const [victim] = childPids(w.proc.pid)
    if (victim === undefined) throw new Error("no worker process")
    process.kill(victim, "SIGKILL")
    // No signal to the parent: it ends by itself, the other worker stopped, so a supervisor restarts it.
    const code = await w.proc.exited
    expect(w.stderr()).toMatch(/msg=worker-failed .*signal=SIGKILL/)
    expect(code).toBe(3)
    expect(list(join(q.root, "processing"))).toEqual([])
    expect(list(join(q.root, "done"))).toEqual(["first.json"])
  })

  it("with --concurrency 4, a SIGTERM to the whole process group, as systemd and Ctrl-C send it, exits 0", async () => {
    await using q = await tempQueue()
    for (let round = 0; round < 3; round++) {
      const proc = Bun.spawn(["setsid", "-w", "bun", consumeBin, "--root", q.root, "--watch", "--concurrency", "4"], {
        stdin: "ignore",
        stdout: "ignore",
        stderr: "pipe",
      })
      let said = ""
      const reading = (async () => {
        for await (const chunk of proc.stderr) said += new TextDecoder().decode(chunk)
      })()
      await until(() => (said.match(/msg=watching /g) ?? []).length === 4, "four workers to watch")
      // setsid, not a group leader when spawned, made the command itself the new group's leader.
      process.kill(-proc.pid, "SIGTERM")
      const code = await proc.exited
      await reading
      expect([round, said.includes("worker-failed"), code]).toEqual([round, false, 0])
    }
  })

  it("with --concurrency 2, the workers stop by themselves once their parent was killed", async () => {
    await using q = await tempQueue()
    await using w = startWatch(q.root, ["--concurrency", "2"])
    await until(
      () => /msg=watching .*worker=1/.test(w.stderr()) && /msg=watching .*worker=2/.test(w.stderr()),
      "both workers to watch",
    )
    const workers = childPids(w.proc.pid)
    expect(workers).toHaveLength(2)
    process.kill(w.proc.pid, "SIGKILL")
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0)
        return true
      } catch {
        return false
      }
    }
    await until(() => !workers.some(alive), "both orphaned workers to stop")
  })
})

describe("consume --concurrency", () => {
  it("drains the sample with two workers to the same end state as one", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    const r = await spool("consume", ["--root", q.root, "--concurrency", "2", "--batch-size", "2"])
    expect(r.stdout).toBe("")
    expect(r.stderr.match(/msg=done /g)).toHaveLength(2)
    expect(r.exitCode).toBe(0)
    expect(list(join(q.root, "done"))).toHaveLength(18)
    expect(list(join(q.root, "error"))).toHaveLength(2)
    expect(list(join(q.root, "processing"))).toEqual([])
    expect(ledgerCount(q.root, "SELECT count(*) AS n FROM processed")).toBe(15)
    expect(read(join(q.root, "dup.txt")).split("\n").filter(Boolean)).toHaveLength(3)
    expect(read(join(q.root, "error.csv")).split("\n").filter(Boolean)).toHaveLength(3)
  })

  it("drains the sample with --one-thread, batch after batch, to the same end state as with its I/O thread", async () => {
    await using one = await tempQueue({ seed: "fixtures" })
    await using two = await tempQueue({ seed: "fixtures" })
    const a = await spool("consume", ["--root", one.root, "--one-thread", "--batch-size", "3"])
    const b = await spool("consume", ["--root", two.root, "--batch-size", "3"])
    expect([a.exitCode, b.exitCode]).toEqual([0, 0])
    for (const d of ["inbox", "processing", "done", "error"])
      expect(list(join(one.root, d))).toEqual(list(join(two.root, d)))
    expect(list(join(one.root, "done"))).toHaveLength(18)
    for (const f of ["dup.txt", "error.csv"]) expect(read(join(one.root, f))).toBe(read(join(two.root, f)))
    const rows = (root: string) => ledgerCount(root, "SELECT count(*) AS n FROM processed")
    expect(rows(one.root)).toBe(15)
    expect(rows(two.root)).toBe(15)
  })

  it("exits with the worst worker's code: 3 when the ledger stays locked", async () => {
    await using q = await tempQueue({ seed: { "a.json": message("a") } })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    q.put("b.json", message("b", 2))
    const holder = new Database(join(q.root, "ledger.db"))
    let r: Awaited<ReturnType<typeof spool>>
    try {
      holder.exec("BEGIN IMMEDIATE")
      r = await spool("consume", ["--root", q.root, "--concurrency", "2", "--busy-timeout", "200ms"])
    } finally {
      holder.exec("ROLLBACK")
      holder.close()
    }
    expect(r.stderr.match(/consume: the ledger .* stayed locked/g)).toHaveLength(2)
    expect(r.stderr.match(/level=warn msg=worker-failed worker=\d pid=\d+ exit_code=3/g)).toHaveLength(2)
    expect(r.exitCode).toBe(3)
    expect(list(join(q.root, "inbox"))).toEqual(["b.json"])
    expect(list(join(q.root, "processing"))).toEqual([])
  })

  it.each([
    ["--concurrency 0", ["--concurrency", "0"]],
    ["--rescan 0s", ["--watch", "--rescan", "0s"]],
    ["--batch-window soon", ["--watch", "--batch-window", "soon"]],
    ["--busy-timeout soon with workers", ["--concurrency", "2", "--busy-timeout", "soon"]],
  ])("refuses %s with exit 2 and one message", async (_label, args) => {
    await using q = await tempQueue({ seed: { "a.json": message("a") } })
    const r = await spool("consume", ["--root", q.root, ...args])
    expect(r.stderr.trim().split("\n")).toHaveLength(1)
    expect(r.stderr).toStartWith("consume: ")
    expect(r.exitCode).toBe(2)
    expect(list(join(q.root, "inbox"))).toEqual(["a.json"])
  })
})
