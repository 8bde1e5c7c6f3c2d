import { afterEach, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { consume } from "../consume/engine.ts"
import { SqliteLedger } from "../ledger/sqlite/ledger.ts"
import { hashAt, InStatus, IoError, IoThread } from "./io-thread.ts"
import { createQueue, type Queue } from "./root.ts"

const cleanups: (() => void)[] = []
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c()
})

function tempQueue(): Queue {
  const dir = fs.mkdtempSync(join(tmpdir(), "spool-io-"))
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
  return createQueue(join(dir, "q"))
}

function ioFor(q: Queue): IoThread {
  const io = new IoThread({
    dirs: { inbox: q.inbox, processing: q.processing, done: q.done, error: q.error },
    maxBytes: 100,
  })
  cleanups.push(() => io.close())
  return io
}

const list = (dir: string) => fs.readdirSync(dir).sort()
const MiB = 1024 * 1024

describe("IoThread.claimIn", () => {
  it("moves each name into processing/ without replacing anything and reads what it moved", async () => {
    const q = tempQueue()
    fs.writeFileSync(join(q.inbox, "a.json"), '{"a":1}')
    fs.writeFileSync(join(q.inbox, "b.json"), '{"b":2}')
    fs.writeFileSync(join(q.inbox, "taken.json"), "new")
    fs.writeFileSync(join(q.processing, "taken.json"), "someone else's")
    const r = await ioFor(q).claimIn(["a.json", "gone.json", "taken.json", "b.json"], Uint8Array.of(1, 1, 1, 1), 4, MiB)
    expect([...r.status]).toEqual([InStatus.moved, InStatus.missing, InStatus.exists, InStatus.moved])
    const text = (i: number) =>
      new TextDecoder().decode(new Uint8Array(r.data, r.spans[2 * i] as number, r.spans[2 * i + 1] as number))
    expect([text(0), text(3)]).toEqual(['{"a":1}', '{"b":2}'])
    expect(r.spans[2]).toBe(-1)
    expect(hashAt(r, 0)).toBe(new Bun.CryptoHasher("sha256").update('{"a":1}').digest("hex"))
    expect(hashAt(r, 3)).toBe(new Bun.CryptoHasher("sha256").update('{"b":2}').digest("hex"))
    expect(hashAt(r, 1)).toBeUndefined()
    expect(list(q.inbox)).toEqual(["taken.json"])
    expect(fs.readFileSync(join(q.processing, "taken.json"), "utf8")).toBe("someone else's")
  })

  it("answers an empty list with an empty reply", async () => {
    const q = tempQueue()
    const r = await ioFor(q).claimIn([], new Uint8Array(0), 0, MiB)
    expect([...r.status]).toEqual([])
    expect(r.data.byteLength).toBe(0)
  })

  it("never opens a FIFO, a symlink or a file over the limit, and says why", async () => {
    const q = tempQueue()
    Bun.spawnSync(["mkfifo", join(q.inbox, "fifo.json")])
    fs.writeFileSync(join(q.root, "target"), "secret")
    fs.symlinkSync(join(q.root, "target"), join(q.inbox, "link.json"))
    fs.writeFileSync(join(q.inbox, "big.json"), "x".repeat(101))
    // readdir's word that these are regular files is wrong for two of them: open(2) catches it.
    const r = await ioFor(q).claimIn(["fifo.json", "link.json", "big.json"], Uint8Array.of(1, 1, 1), 3, MiB)
    expect([...r.status]).toEqual([InStatus.moved, InStatus.moved, InStatus.moved])
    expect(r.rejects.map(([i, reason]) => [i, reason])).toEqual([
      [0, "not-regular"],
      [1, "symlink"],
      [2, "too-large"],
    ])
    expect(fs.readFileSync(join(q.root, "target"), "utf8")).toBe("secret")
  })

  it("reads ahead only up to its byte budget and leaves the rest for the caller", async () => {
    const q = tempQueue()
    for (const n of ["1", "2", "3"]) fs.writeFileSync(join(q.inbox, `${n}.json`), "0123456789")
    const r = await ioFor(q).claimIn(["1.json", "2.json", "3.json"], Uint8Array.of(1, 1, 1), 3, 25)
    expect([...r.spans]).toEqual([0, 10, 10, 10, -1, -1])
    expect(hashAt(r, 1)).toHaveLength(64)
    expect(hashAt(r, 2)).toBeUndefined()
    expect(r.data.byteLength).toBe(20)
  })

  it("reads only the first readCount of the files it moved, so the caller can share the reading", async () => {
    const q = tempQueue()
    for (const n of ["1", "2", "3"]) fs.writeFileSync(join(q.inbox, `${n}.json`), "0123456789")
    const r = await ioFor(q).claimIn(["1.json", "gone.json", "2.json", "3.json"], Uint8Array.of(1, 1, 1, 1), 2, MiB)
    expect([...r.status]).toEqual([InStatus.moved, InStatus.missing, InStatus.moved, InStatus.moved])
    expect([...r.spans]).toEqual([0, 10, -1, -1, 10, 10, -1, -1])
    expect(list(q.processing)).toEqual(["1.json", "2.json", "3.json"])
  })

  it("reports a failure with what it had already done", async () => {
    const q = tempQueue()
    fs.writeFileSync(join(q.inbox, "a.json"), "{}")
    fs.writeFileSync(join(q.inbox, "b.json"), "{}")
    fs.rmSync(q.processing, { recursive: true })
    const error = await ioFor(q)
      .claimIn(["a.json", "b.json"], Uint8Array.of(1, 1), 2, MiB)
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(IoError)
    expect((error as IoError).code).toBe("io")
    expect([...((error as IoError).status ?? [])]).toEqual([InStatus.untried, InStatus.untried])
    expect(list(q.inbox)).toEqual(["a.json", "b.json"])
  })
})

describe("IoThread.moveOut", () => {
  it("moves files to done/ and error/, giving a taken error/ name a ~k suffix it reports", async () => {
    const q = tempQueue()
    for (const n of ["a.json", "b.json"]) fs.writeFileSync(join(q.processing, n), n)
    fs.writeFileSync(join(q.error, "b.json"), "earlier")
    const r = await ioFor(q).moveOut([
      ["a.json", "done", "a.json"],
      ["b.json", "error", "b.json"],
    ])
    expect(r.renamed).toEqual([[1, "b~1.json"]])
    expect(list(q.processing)).toEqual([])
    expect(list(q.done)).toEqual(["a.json"])
    expect(list(q.error)).toEqual(["b.json", "b~1.json"])
    expect(fs.readFileSync(join(q.error, "b~1.json"), "utf8")).toBe("b.json")
  })

  it("reports by index a file it must move that has vanished, moves the others, and idle() resolves", async () => {
    const q = tempQueue()
    fs.writeFileSync(join(q.processing, "a.json"), "a")
    fs.writeFileSync(join(q.processing, "c.json"), "c")
    const io = ioFor(q)
    const reply = await io.moveOut([
      ["a.json", "done", "a.json"],
      ["nope.json", "done", "nope.json"],
      ["c.json", "error", "c.json"],
    ])
    expect(reply).toEqual({ renamed: [], missing: [1] })
    expect(fs.readdirSync(q.processing)).toEqual([])
    expect(fs.readdirSync(q.done)).toEqual(["a.json"])
    expect(fs.readdirSync(q.error)).toEqual(["c.json"])
    await io.idle()
  })
})

describe("consume with the pipeline", () => {
  /** The same hostile inbox in two queues: every kind of file, duplicates, conflicts, sizes. */
  function hostileQueue(): Queue {
    const q = tempQueue()
    const put = (name: string, body: string) => fs.writeFileSync(join(q.inbox, name), body)
    for (let i = 0; i < 60; i++) {
      const id = `m${i % 40}` // 20 redeliveries
      const amount = i >= 50 ? i : i % 40 // 10 of them conflict
      put(
        `f${String(i).padStart(3, "0")}.json`,
        JSON.stringify({ msg_id: id, order_no: "A", seq: (i % 40) + 1, amount }),
      )
    }
    put("bad-json.json", "{")
    put("no-amount.json", JSON.stringify({ msg_id: "x", order_no: "A", seq: 1 }))
    put("big.json", JSON.stringify({ msg_id: "big", order_no: "A", seq: 1, amount: 1, pad: "x".repeat(3000) }))
    fs.symlinkSync("/etc/hostname", join(q.inbox, "link.json"))
    fs.mkdirSync(join(q.inbox, "dir.json"))
    Bun.spawnSync(["mkfifo", join(q.inbox, "fifo.json")])
    return q
  }

  /** The outcome of a run: where each file went and what the ledger recorded for it. */
  function outcome(q: Queue) {
    const db = SqliteLedger.open(q.ledger, { readonly: true })
    try {
      return {
        processing: list(q.processing),
        inbox: list(q.inbox),
        done: list(q.done),
        error: list(q.error),
        processed: db.db.query("SELECT msg_id, file, amount FROM processed ORDER BY msg_id").all(),
        duplicates: db.db.query("SELECT msg_id, file, is_conflict FROM duplicates ORDER BY file").all(),
        failures: db.db.query("SELECT file, reason FROM failures ORDER BY file").all(),
        claims: db.db.query("SELECT COUNT(*) AS n FROM claims").get(),
      }
    } finally {
      db.close()
    }
  }

  async function run(q: Queue, pipeline: boolean) {
    const ledger = SqliteLedger.open(q.ledger)
    try {
      // Small batches (many in flight) and a read-ahead budget that two ordinary files fill,
      // so most files are read on the main thread and some by the I/O thread.
      return await consume({ queue: q, ledger, batchSize: 7, maxBytes: 2000, pipeline, readAheadBytes: 150 })
    } finally {
      ledger.close()
    }
  }

  it("ends every file and ledger row exactly as the one-thread protocol does", async () => {
    const one = hostileQueue()
    const two = hostileQueue()
    const s1 = await run(one, false)
    const s2 = await run(two, true)
    expect(s2).toEqual(s1)
    expect(outcome(two)).toEqual(outcome(one))
    const o = outcome(two)
    expect(o.processing).toEqual([])
    expect(o.inbox).toEqual([])
    expect(o.claims).toEqual({ n: 0 })
    expect(s2).toMatchObject({ claimed: 66, processed: 40, duplicates: 20, conflicts: 10, rejected: 6 })
    expect(s2.batches).toBe(10)
  })
})

describe("the pipelined protocol's fsyncs", () => {
  /**
   * Consumes `n` files in batches of 5 through the I/O thread, logging in order each directory
   * fsync (by directory), each commit and each claim transaction's list of claims to forget.
   */
  async function logged(n: number, durable: boolean): Promise<string[]> {
    const q = tempQueue()
    for (let i = 0; i < n; i++)
      fs.writeFileSync(
        join(q.inbox, `m${i}.json`),
        JSON.stringify({ msg_id: `m${i}`, order_no: "o", seq: i + 1, amount: 1 }),
      )
    const dirOf = new Map(
      (["inbox", "processing", "done", "error"] as const).map((d) => [fs.statSync(q[d]).ino, d] as const),
    )
    const log: string[] = []
    const ledger = SqliteLedger.open(q.ledger, { durable })
    const { commit, claim, unregisterConsumer } = ledger
    ledger.commit = (...a: Parameters<typeof commit>) => {
      log.push("commit")
      return commit.apply(ledger, a)
    }
    ledger.claim = (...a: Parameters<typeof claim>) => {
      log.push(`claim forgetting ${a[3]?.length ?? 0}`)
      return claim.apply(ledger, a)
    }
    // The end of a run forgets every committed claim still there.
    ledger.unregisterConsumer = (...a: Parameters<typeof unregisterConsumer>) => {
      log.push("unregister")
      return unregisterConsumer.apply(ledger, a)
    }
    const fsync = fs.fsyncSync
    fs.fsyncSync = (fd: number) => {
      const dir = dirOf.get(fs.fstatSync(fd).ino)
      if (dir !== undefined) log.push(`fsync ${dir}`)
      return fsync(fd)
    }
    try {
      await consume({ queue: q, ledger, batchSize: 5, pipeline: true, durable })
    } finally {
      fs.fsyncSync = fsync
      ledger.close()
    }
    expect(fs.readdirSync(q.done)).toHaveLength(n)
    return log
  }

  it("makes each batch's renames in durable before its commit, and its renames out before its claims are forgotten", async () => {
    const log = await logged(20, true)
    const commits = log.flatMap((e, i) => (e === "commit" ? [i] : []))
    expect(commits).toHaveLength(4)
    // Before each commit, since the one before: inbox/ and processing/ fsynced (its batch's claim).
    for (const [k, at] of commits.entries()) {
      const since = log.slice(k === 0 ? 0 : (commits[k - 1] as number) + 1, at)
      expect(since).toContain("fsync inbox")
      expect(since).toContain("fsync processing")
    }
    // What forgets claims (a claim transaction given some to forget, and the run's end) comes
    // after done/ was fsynced since the commit of the files it forgets. Which claim transactions
    // forget depends on when the I/O thread's moves finish; the run's end always does.
    const forgetting = log.flatMap((e, i) => (/^claim forgetting [1-9]|^unregister$/.test(e) ? [i] : []))
    expect(log.at(forgetting.at(-1) as number)).toBe("unregister")
    for (const at of forgetting) {
      const lastCommit = commits.filter((c) => c < at).at(-1) as number
      expect(log.slice(lastCommit, at)).toContain("fsync done")
    }
  })

  it("fsyncs no directory with durable off", async () => {
    expect((await logged(20, false)).filter((e) => e.startsWith("fsync"))).toEqual([])
  })
})
