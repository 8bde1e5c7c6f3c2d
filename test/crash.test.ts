// Crash equivalence at each named step: however consume is killed, the queue ends exactly as
// after one uninterrupted run. Every run here is the real process (Bun.spawn), killed with
// SIGKILL. Kills at random points are kill-storm.test.ts's.
import { Database } from "bun:sqlite"
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  consumeToEnd,
  diffSnapshots,
  endState,
  generateMessages,
  list,
  makeQueueFrom,
  pgUnavailable,
  repoRoot,
  type Snapshot,
  snapshot,
  startConsume,
  type TempDir,
  tempDatabase,
  tempDir,
} from "@spool/test-support"

const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)

const claimRows = (root: string) => {
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    return db.query("SELECT name, state, attempts FROM claims ORDER BY rowid").all() as {
      name: string
      state: "claimed" | "committed"
      attempts: number
    }[]
  } finally {
    db.close()
  }
}

const consumerRows = (root: string) => {
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    return db.query("SELECT owner_id, pid FROM consumers").all() as { owner_id: string; pid: number }[]
  } finally {
    db.close()
  }
}

describe("consume killed at each named step of the protocol (SPOOL_FAULT)", () => {
  let t: TempDir
  let reference: Snapshot
  let n = 0
  const args = ["--batch-size", "20"]

  beforeAll(async () => {
    t = await tempDir()
    generateMessages(join(t.path, "src"), 300, 99)
    makeQueueFrom(join(t.path, "src"), join(t.path, "ref"))
    await consumeToEnd(join(t.path, "ref"), ["--batch-size", "1000"])
    reference = snapshot(join(t.path, "ref"))
  }, 60_000)
  afterAll(() => t[Symbol.asyncDispose](), 60_000)

  /** A fresh copy of the queue, killed by the hook at `fault`; returns its root and what the kill left. */
  async function killedAt(fault: string) {
    const root = join(t.path, `q${n++}`)
    makeQueueFrom(join(t.path, "src"), root)
    const r = await startConsume(root, args, { SPOOL_FAULT: fault }).finished
    expect(r.signalCode).toBe("SIGKILL")
    return { root, claims: claimRows(root), processing: list(join(root, "processing")) }
  }

  it("after-claim: the batch in hand is processed again on restart, with nothing lost or doubled", async () => {
    const { root, claims, processing } = await killedAt("after-claim@3")
    // In processing/: the batch in hand; the pipeline's next batch, claimed one ahead, which
    // the I/O thread may have been moving in at the kill; and the batch before, committed,
    // whose move out may not have finished. Every one of them has its claim row.
    const claimed = claims.filter((c) => c.state === "claimed").map((c) => c.name)
    expect(claimed).toHaveLength(40)
    const inHand = claimed.slice(0, 20)
    expect(inHand.filter((name) => !processing.includes(name))).toEqual([])
    const held = new Set(claims.map((c) => c.name))
    expect(processing.filter((name) => !held.has(name))).toEqual([])
    expect(processing.length).toBeLessThanOrEqual(60)
    const restart = await consumeToEnd(root, args)
    expect(restart.stderr).toContain("claimed, not committed")
    expect(diffSnapshots(reference, snapshot(root))).toEqual([])
  }, 30_000)

  it("a killed run's consumers row is deleted by the restart's recovery, not left forever", async () => {
    const { root } = await killedAt("after-claim@2")
    expect(consumerRows(root)).toHaveLength(1)
    await consumeToEnd(root, args)
    // The restart unregisters itself on its clean exit; the killed run's row went at recovery.
    expect(consumerRows(root)).toEqual([])
    expect(claimRows(root)).toEqual([])
    expect(diffSnapshots(reference, snapshot(root))).toEqual([])
  }, 30_000)

  it("after-commit: a committed batch is only moved on restart, never recorded as duplicates", async () => {
    const { root, claims, processing } = await killedAt("after-commit@3")
    // The batch just committed, all of it; around it, the pipeline's neighbours (the next batch
    // claimed, the one before still moving out), each file with its claim row.
    const committed = claims.filter((c) => c.state === "committed" && processing.includes(c.name))
    expect(committed.length).toBeGreaterThanOrEqual(20)
    expect(committed.length).toBeLessThanOrEqual(40)
    const held = new Set(claims.map((c) => c.name))
    expect(processing.filter((name) => !held.has(name))).toEqual([])
    expect(processing.length).toBeLessThanOrEqual(60)
    const restart = await consumeToEnd(root, args)
    expect(restart.stderr).toContain("committed, not yet moved")
    const s = snapshot(root)
    expect(diffSnapshots(reference, s)).toEqual([])
    const recovered = new Set(processing)
    const duplicated = s.duplicates as { file: string }[]
    expect(duplicated.filter((d) => recovered.has(d.file))).toEqual(
      (reference.duplicates as { file: string }[]).filter((d) => recovered.has(d.file)),
    )
  }, 30_000)

  it("after-commit, restarted with a smaller --max-bytes: the committed files are still only moved", async () => {
    // Recovery checks that processing/ holds the very file a claim committed by hashing it whole,
    // not by the size limit the restart happens to have.
    const { root, claims, processing } = await killedAt("after-commit@3")
    const committed = claims.filter((c) => c.state === "committed" && processing.includes(c.name)).map((c) => c.name)
    expect(committed.length).toBeGreaterThanOrEqual(20)
    const restart = await consumeToEnd(root, [...args, "--max-bytes", "16"])
    expect(restart.stderr).toContain("committed, not yet moved")
    expect(restart.stderr).not.toContain("taken as new")
    const done = new Set(list(join(root, "done")))
    expect(committed.filter((name) => !done.has(name))).toEqual([])
  }, 30_000)

  it("after-move: the moved batches are final, what is still in processing/ is claimed, and the restart finishes the rest", async () => {
    const { root, claims, processing } = await killedAt("after-move@3")
    // Three batches are out; the batches after them may be in flight (claimed one ahead, and the
    // next committed while the third moved), each file in processing/ with its claim row.
    expect(list(join(root, "done")).length + list(join(root, "error")).length).toBeGreaterThanOrEqual(60)
    const held = new Set(claims.map((c) => c.name))
    expect(processing.filter((name) => !held.has(name))).toEqual([])
    await consumeToEnd(root, args)
    expect(diffSnapshots(reference, snapshot(root))).toEqual([])
  }, 30_000)

  it("after-reports: the queue is already final and a restart changes nothing", async () => {
    const { root, claims, processing } = await killedAt("after-reports")
    expect(processing).toEqual([])
    expect(claims).toEqual([])
    expect(diffSnapshots(reference, snapshot(root))).toEqual([])
    await consumeToEnd(root, args)
    expect(diffSnapshots(reference, snapshot(root))).toEqual([])
  }, 30_000)

  for (const backend of ["SQLite", "PostgreSQL"] as const)
    (backend === "PostgreSQL" && pgSkip ? it.skip : it)(
      `a crashed batch is redone in its first order, so the same delivery of each msg_id wins (${backend})`,
      async () => {
        await using q = await tempDir()
        await using refDb = backend === "PostgreSQL" ? await tempDatabase() : undefined
        await using crashDb = backend === "PostgreSQL" ? await tempDatabase() : undefined
        const ledger = (db: { url: string } | undefined) => (db === undefined ? [] : ["--ledger", db.url])
        // 20 deliveries of 4 msg_ids, payloads all different: which file of each is processed and
        // which are duplicates or conflicts depends only on the order of processing, which is the
        // directory's, not the names'.
        const src = join(q.path, "src")
        fs.mkdirSync(src)
        for (let i = 0; i < 20; i++)
          fs.writeFileSync(
            join(src, `d-${i}.json`),
            JSON.stringify({ msg_id: `id-${i % 4}`, order_no: "A", seq: 1, amount: i }),
          )
        makeQueueFrom(src, join(q.path, "ref"))
        makeQueueFrom(src, join(q.path, "crash"))
        await consumeToEnd(join(q.path, "ref"), [...args, ...ledger(refDb)])
        const r = await startConsume(join(q.path, "crash"), [...args, ...ledger(crashDb)], {
          SPOOL_FAULT: "after-claim",
        }).finished
        expect(r.signalCode).toBe("SIGKILL")
        expect(list(join(q.path, "crash", "processing"))).toHaveLength(20)
        await consumeToEnd(join(q.path, "crash"), [...args, ...ledger(crashDb)])
        expect(
          diffSnapshots(
            await endState(join(q.path, "ref"), refDb?.url),
            await endState(join(q.path, "crash"), crashDb?.url),
          ),
        ).toEqual([])
      },
      30_000,
    )

  it("a kill during recovery itself is recovered in turn", async () => {
    const { root, claims: left, processing } = await killedAt("after-claim@2")
    // The restart retries alone each claimed file in processing/: the batch in hand and
    // whatever of the next one the I/O thread had moved in.
    const retried = left.filter((c) => c.state === "claimed" && processing.includes(c.name)).length
    expect(retried).toBeGreaterThanOrEqual(20)
    // The restart dies after its 5th commit: the 5th file it retries alone.
    const second = await startConsume(root, args, { SPOOL_FAULT: "after-commit@5" }).finished
    expect(second.signalCode).toBe("SIGKILL")
    const claims = claimRows(root)
    expect(claims.filter((c) => c.state === "committed")).toHaveLength(5)
    expect(claims.filter((c) => c.state === "claimed")).toHaveLength(retried - 5)
    // Only the files retried alone had their attempt counted; the rest were never read again.
    expect(claims.map((c) => c.attempts)).toEqual([...Array(5).fill(2), ...Array(retried - 5).fill(1)])
    await consumeToEnd(root, args)
    expect(diffSnapshots(reference, snapshot(root))).toEqual([])
  }, 30_000)
})

describe("a kill just after recovery counts an attempt", () => {
  it("finds the file judged and committed, so kills that do not fall on a file in hand never make it poison", async () => {
    await using t = await tempDir()
    const root = join(t.path, "q")
    for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
    for (let i = 1; i <= 3; i++)
      fs.writeFileSync(
        join(root, "inbox", `m-${i}.json`),
        JSON.stringify({ msg_id: `id-${i}`, order_no: "A", seq: i, amount: i }),
      )
    // A run dies with the batch in hand: each file claimed once, none judged.
    expect((await startConsume(root, [], { SPOOL_FAULT: "after-claim" }).finished).signalCode).toBe("SIGKILL")
    expect(claimRows(root).map((c) => [c.state, c.attempts])).toEqual(Array(3).fill(["claimed", 1]))
    // Two restarts, each killed at the first chance after its recovery counted an attempt (one
    // with no attempt to count finishes on its own).
    const app = join(repoRoot, "test/apps/dies-after-attempt.ts")
    for (let i = 0; i < 2; i++) {
      const proc = Bun.spawn(["bun", app, root], { cwd: repoRoot, stdout: "ignore", stderr: "inherit" })
      const code = await proc.exited
      expect(proc.signalCode === "SIGKILL" || code === 0).toBe(true)
    }
    // The first retry committed before the kill: no attempt was ever counted on a file not in hand.
    expect(claimRows(root).filter((c) => c.state === "claimed")).toEqual([])
    await consumeToEnd(root)
    expect(list(join(root, "done"))).toEqual(["m-1.json", "m-2.json", "m-3.json"])
    expect(list(join(root, "error"))).toEqual([])
    expect(snapshot(root).failures).toEqual([])
  }, 60_000)
})

describe("a message that crashes the consumer every time (SPOOL_CRASH_ON)", () => {
  /** 40 valid messages, the poison one among them; batches of 10 so it has batch-mates. */
  function poisonQueue(root: string) {
    for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
    for (let i = 1; i <= 40; i++) {
      const name = `m-${String(i).padStart(2, "0")}.json`
      fs.writeFileSync(
        join(root, "inbox", name),
        JSON.stringify({ msg_id: `id-${i}`, order_no: "A", seq: i, amount: i }),
      )
    }
  }

  /** Restarts consume until a run exits on its own; returns the attempts seen after each crash. */
  async function runUntilDone(root: string, args: string[]) {
    const attemptsAfterCrash: number[] = []
    for (let i = 0; i < 12; i++) {
      const r = await startConsume(root, ["--batch-size", "10", ...args], { SPOOL_CRASH_ON: "m-15.json" }).finished
      if (r.exitCode === 0) return { attemptsAfterCrash, last: r }
      expect(r.signalCode).toBe("SIGKILL")
      attemptsAfterCrash.push(claimRows(root).find((c) => c.name === "m-15.json")?.attempts ?? -1)
    }
    throw new Error("consume never finished: the poison message loops")
  }

  it("goes to error/ as poison after 3 claims by default, and every other message flows", async () => {
    await using t = await tempDir()
    const root = join(t.path, "q")
    poisonQueue(root)
    const { attemptsAfterCrash } = await runUntilDone(root, [])
    // The counter lives in the ledger, so it survives each restart: 1 (in a batch), 2, 3 (alone).
    expect(attemptsAfterCrash).toEqual([1, 2, 3])
    expect(list(join(root, "error"))).toEqual(["m-15.json"])
    expect(list(join(root, "done"))).toHaveLength(39)
    expect(list(join(root, "processing"))).toEqual([])
    expect(list(join(root, "inbox"))).toEqual([])
    expect(fs.readFileSync(join(root, "error.csv"), "utf8")).toBe("file,reason\nm-15.json,poison\n")
    const s = snapshot(root)
    expect(s.failures).toEqual([{ file: "m-15.json", original: "m-15.json", reason: "poison" }])
    expect(s.processed).toHaveLength(39)
    expect(s.claims).toEqual([])
  }, 60_000)

  it("takes as many claims as --max-attempts says", async () => {
    await using t = await tempDir()
    const root = join(t.path, "q")
    poisonQueue(root)
    const { attemptsAfterCrash } = await runUntilDone(root, ["--max-attempts", "4"])
    expect(attemptsAfterCrash).toEqual([1, 2, 3, 4])
    expect(list(join(root, "error"))).toEqual(["m-15.json"])
    expect(list(join(root, "done"))).toHaveLength(39)
  }, 60_000)
})

describe("a committed claim of a file judged unread, its file replaced before recovery", () => {
  // The state a power cut can leave (power-cut-unflushed.test.ts makes it with a real cut): a
  // committed claim whose forgetting was lost, over a new file of the same name in processing/.
  // A file judged unread has no hash to tell the two apart; its claim keeps its inode, size
  // and time instead.
  const args = ["--max-bytes", "100"]
  /** A file over the size limit, a symbolic link and a FIFO: each judged without its bytes. */
  const unread = ["big.json", "link.json", "pipe.json"]
  const fileOf = (id: string, pad = 0) =>
    `${JSON.stringify({ msg_id: id, order_no: `O-${id}`, seq: 1, amount: 5 })}${" ".repeat(pad)}\n`

  for (const backend of ["SQLite", "PostgreSQL"] as const)
    (backend === "PostgreSQL" && pgSkip ? it.skip : it)(
      `moves on the file it committed, and processes a new file of its name as new (${backend})`,
      async () => {
        await using q = await tempDir()
        fs.writeFileSync(join(q.path, "outside.json"), fileOf("m-outside"))
        const src = join(q.path, "src")
        fs.mkdirSync(src)
        fs.writeFileSync(join(src, "big.json"), fileOf("m-big", 200))
        const killed = async (name: string, db: { url: string } | undefined) => {
          const root = join(q.path, name)
          makeQueueFrom(src, root)
          fs.symlinkSync(join(q.path, "outside.json"), join(root, "inbox", "link.json"))
          expect(Bun.spawnSync(["mkfifo", join(root, "inbox", "pipe.json")]).exitCode).toBe(0)
          const ledger = db === undefined ? [] : ["--ledger", db.url]
          const r = await startConsume(root, [...args, ...ledger], { SPOOL_FAULT: "after-commit" }).finished
          expect(r.signalCode).toBe("SIGKILL")
          expect(list(join(root, "processing")).sort()).toEqual(unread)
          return { root, restart: () => consumeToEnd(root, [...args, ...ledger]) }
        }

        await using sameDb = backend === "PostgreSQL" ? await tempDatabase() : undefined
        const same = await killed("same", sameDb)
        const again = await same.restart()
        expect(again.stderr).toContain("committed, not yet moved")
        expect(again.stderr).not.toContain("taken as new")
        const kept = await endState(same.root, sameDb?.url)
        expect(Object.keys(kept.error).sort()).toEqual(unread)
        expect(kept.processing).toEqual({})
        expect((kept.failures as { file: string; reason: string }[]).map((f) => [f.file, f.reason])).toEqual([
          ["big.json", "too-large"],
          ["link.json", "symlink"],
          ["pipe.json", "not-regular"],
        ])

        await using swappedDb = backend === "PostgreSQL" ? await tempDatabase() : undefined
        const swapped = await killed("swapped", swappedDb)
        // The committed files leave (still existing, so no inode is reused) and new ones take their names.
        for (const name of unread) {
          fs.renameSync(join(swapped.root, "processing", name), join(q.path, `left-${name}`))
          fs.writeFileSync(join(swapped.root, "processing", name), fileOf(`m-new-${name}`))
        }
        const recovered = await swapped.restart()
        expect(recovered.stderr).toContain("taken as new")
        const state = await endState(swapped.root, swappedDb?.url)
        expect(Object.keys(state.done).sort()).toEqual(unread)
        expect(state.error).toEqual({})
        expect((state.processed as { msg_id: string }[]).map((p) => p.msg_id).sort()).toEqual(
          unread.map((name) => `m-new-${name}`),
        )
        expect(state.processing).toEqual({})
        expect(fs.readFileSync(join(q.path, "outside.json"), "utf8")).toBe(fileOf("m-outside"))
      },
      30_000,
    )
})
