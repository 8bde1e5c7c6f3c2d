// Power cuts: consumers on a file system that forgets, at each cut, everything not fsynced
// (packages/test-support/native/power-cut-fs.c states the model), the queue and the SQLite
// ledger both on it. The end state after the cuts and one more run must be the one a single
// uninterrupted run reaches, by the kill storms' rules. With --no-fsync it must not be: the
// loss and the doubling ARCHITECTURE.md's Durability section predicts are found.
//
// The SQLite ledger is on the mount too (in the root, where consume keeps it): its WAL fsync
// at each commit is half of what the protocol's order rests on, so it must be cut with the
// renames it is ordered against. A PostgreSQL server keeps its power; only the queue is cut.

import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  consumeToEnd,
  cutAgainstReference,
  cutLog,
  diffIgnoringWinners,
  diffSnapshots,
  endState,
  generateMessages,
  killedThenCut,
  makeQueueFrom,
  missingTest,
  mountPowerCut,
  pgUnavailable,
  powerCutUnavailable,
  repoRoot,
  run,
  type Snapshot,
  startConsume,
  summarizeCuts,
  tempDatabase,
  tempDir,
} from "@spool/test-support"

const fuseMissing = await powerCutUnavailable()
const provides = "installs fuse3 and libfuse3-dev and offers /dev/fuse to"
const fuseIt = fuseMissing === undefined ? it : missingTest(fuseMissing, provides)
const pgSkip = await pgUnavailable()
const pgFuseIt =
  fuseMissing !== undefined ? fuseIt : pgSkip === undefined ? it : missingTest(pgSkip, "runs a PostgreSQL server for")

const sqlite = async () => ({ url: undefined, async [Symbol.asyncDispose]() {} })

/**
 * Generates `messages`, runs one copy once uninterrupted on a plain directory and another on
 * the power-cut file system under `cuts` cuts, and returns both end states and the cuts.
 */
async function storm(o: {
  messages: number
  seed: number
  args?: string[]
  consumers: number
  cuts: number
  modes: "all" | "subset" | "both"
  postgres?: boolean
  bin?: string
  cutAt?: "random" | "end"
}) {
  await using t = await tempDir()
  const ledger = o.postgres ? tempDatabase : sqlite
  await using refLedger = await ledger()
  await using cutLedger = await ledger()
  generateMessages(join(t.path, "src"), o.messages, o.seed)
  const r = await cutAgainstReference({
    dir: t.path,
    args: ["--batch-size", "25", ...(o.args ?? [])],
    seed: o.seed,
    consumers: o.consumers,
    cuts: o.cuts,
    modeOf: (i) => (o.modes === "both" ? (i % 2 === 0 ? "all" : "subset") : o.modes),
    // A cut throws away only what was not yet durable, so each round gets further: cuts land
    // early in what is left, and several cover a run.
    activeMs: (ms) => Math.max(100, ms * (o.consumers > 1 ? 0.5 : 0.3)),
    ledgers: { reference: refLedger.url, cut: cutLedger.url },
    newLedger: ledger,
    ...(o.bin !== undefined && { bin: o.bin }),
    ...(o.cutAt !== undefined && { cutAt: o.cutAt }),
  })
  const ledgerDb = join(t.path, "cut", "backing", "ledger.db")
  const applied = o.bin === undefined || o.postgres ? undefined : appliedRows(ledgerDb)
  const deferredDir = join(t.path, "cut", "backing", "deferred")
  const deferredLeft = fs.existsSync(deferredDir) ? fs.readdirSync(deferredDir) : []
  const where = summarizeCuts(r.run.cuts)
  // One consumer takes its files in one order and must reach a clean run's state exactly, unless
  // a cut kept a claim and undid an earlier one (claimsOvertaken): then, of two deliveries of one
  // msg_id, either may have come first, and nothing else may differ.
  const isExact = o.consumers === 1 && where.reordered === 0
  const diff = isExact ? diffSnapshots(r.expected, r.actual) : diffIgnoringWinners(r.expected, r.actual)
  const log = cutLog(r.run.cuts)
  console.log(
    `power-cut: seed ${o.seed}, ${r.run.starts} runs, ${where.cuts} cuts (${where.claimsUndone} undid claims, ` +
      `${where.movesUndone} undid moves, ${where.ledgerWritesLost} lost ledger writes, ${where.orphansLeft} left orphans, ${where.reordered} reordered claims, ` +
      `${where.afterRun} after a run's end): ` +
      `${diff.length === 0 ? "equivalent" : "DIVERGED"}`,
  )
  if (diff.length > 0 && !o.args?.includes("--no-fsync"))
    console.warn([`power-cut diverged, seed ${o.seed}:`, ...diff, ...log].join("\n  "))
  return { ...r, diff, isExact, where, log, applied, deferredLeft }
}

/** What test/apps/flaky.ts applied and what the ledger processed and still defers, from a SQLite ledger. */
function appliedRows(path: string) {
  const db = new Database(path, { readonly: true })
  try {
    const ids = (q: string) => (db.query(q).all() as { msg_id: string }[]).map((r) => r.msg_id)
    return {
      applied: ids("SELECT msg_id FROM applied ORDER BY msg_id"),
      processed: ids("SELECT msg_id FROM processed ORDER BY msg_id"),
      deferrals: (db.query("SELECT count(*) AS n FROM deferrals").get() as { n: number }).n,
    }
  } finally {
    db.close()
  }
}

/** Messages whose effect a run lost: processed in the expected state, in done/ here, with no processed row. */
function effectsLost(expected: Snapshot, actual: Snapshot): string[] {
  const ids = new Set((actual.processed as { msg_id: string }[]).map((r) => r.msg_id))
  return (expected.processed as { msg_id: string; file: string }[])
    .filter((r) => !ids.has(r.msg_id) && r.file in actual.done)
    .map((r) => r.msg_id)
}

/** Deliveries a run recorded as duplicates that the expected state processed: a message applied, then taken again. */
function doubled(expected: Snapshot, actual: Snapshot): string[] {
  const key = (r: { file: string; payload_hash: string }) => `${r.file}:${r.payload_hash}`
  const wasProcessed = new Set((expected.processed as { file: string; payload_hash: string }[]).map(key))
  return (actual.duplicates as { file: string; payload_hash: string }[])
    .filter((r) => wasProcessed.has(key(r)))
    .map(key)
}

describe("power cuts of a queue and its SQLite ledger", () => {
  for (const modes of ["all", "subset"] as const) {
    const what = modes === "all" ? "everything unsynced lost" : "a random part of the unsynced changes lost"
    fuseIt(
      `one consumer, ${what} at each cut: the state of one clean run, exactly where the claims kept their order`,
      async () => {
        const { actual, where, diff, isExact } = await storm({
          messages: 1200,
          seed: modes === "all" ? 31 : 32,
          consumers: 1,
          cuts: 6,
          modes,
        })
        expect(diff).toEqual([])
        // A full cut undoes every claim not yet durable, so it never reorders them.
        if (modes === "all") expect(isExact).toBe(true)
        expect(where.cuts).toBeGreaterThanOrEqual(2)
        expect(actual.processing).toEqual({})
      },
      600_000,
    )

    fuseIt(
      `three consumers, ${what} at each cut: the state of one clean run`,
      async () => {
        const { expected, actual, where, diff } = await storm({
          messages: 1500,
          seed: modes === "all" ? 33 : 34,
          consumers: 3,
          cuts: 5,
          modes,
        })
        expect(diff).toEqual([])
        expect(actual.failures).toEqual(expected.failures)
        expect(where.cuts).toBeGreaterThanOrEqual(2)
        expect(actual.processing).toEqual({})
      },
      600_000,
    )
  }
})

describe("a power cut between a claim's renames and its rows' next full commit", () => {
  fuseIt(
    "leaves the batch in processing/ with no claim rows: orphans, taken as new, each processed once",
    async () => {
      // A claim's rows commit without their own flush (the next full commit makes them durable);
      // its renames are fsynced before it goes on. A cut right there keeps the renames and loses
      // the rows, the one way a file reaches processing/ with no claim: recovery must take each
      // such orphan as a new delivery, by the inbox/ rules, and the end state must be a clean run's.
      await using t = await tempDir()
      generateMessages(join(t.path, "src"), 200, 39)
      makeQueueFrom(join(t.path, "src"), join(t.path, "reference"))
      await consumeToEnd(join(t.path, "reference"), ["--batch-size", "25"])
      const backing = join(t.path, "cut", "backing")
      makeQueueFrom(join(t.path, "src"), backing)
      await killedThenCut({
        backing,
        state: join(t.path, "cut"),
        args: ["--batch-size", "25"],
        env: { SPOOL_BOOT_ID: "orphan-boot-1", SPOOL_FAULT: "after-claim@1" },
      })
      await using mount = await mountPowerCut(backing, join(t.path, "cut"))
      const orphans = fs.readdirSync(join(mount.root, "processing"))
      const db = new Database(join(mount.root, "ledger.db"), { readonly: true })
      const claims = (db.query("SELECT name FROM claims").all() as { name: string }[]).map((r) => r.name)
      db.close()
      // The first claim's batch at least (the claimer may have renamed the next batch too).
      expect(claims).toEqual([])
      expect(orphans.length).toBeGreaterThanOrEqual(25)
      const r = await startConsume(mount.root, ["--batch-size", "25"], { SPOOL_BOOT_ID: "orphan-boot-2" }).finished
      expect(r.exitCode, r.stderr).toBe(0)
      for (const name of orphans) expect(r.stderr).toContain(name)
      const actual = await endState(mount.root)
      await mount.unmount()
      expect(diffSnapshots(await endState(join(t.path, "reference")), actual)).toEqual([])
      expect(actual.processing).toEqual({})
    },
    120_000,
  )
})

describe("a power cut of a root bound to PostgreSQL, right after its first claim", () => {
  pgFuseIt(
    "keeps the root's .spool-root-id, so the server's rows stay the root's and its claims are recovered",
    async () => {
      // The id is fsynced, and the root after it, before the ledger records anything under it:
      // an id lost with the cut would make the root a new one to the server, the claims it holds
      // never recovered and their messages taken again. The server keeps its power.
      await using t = await tempDir()
      await using refLedger = await tempDatabase()
      await using cutLedger = await tempDatabase()
      generateMessages(join(t.path, "src"), 200, 40)
      makeQueueFrom(join(t.path, "src"), join(t.path, "reference"))
      await consumeToEnd(join(t.path, "reference"), ["--batch-size", "25", "--ledger", refLedger.url ?? ""])
      const backing = join(t.path, "cut", "backing")
      makeQueueFrom(join(t.path, "src"), backing)
      const args = ["--batch-size", "25", "--ledger", cutLedger.url ?? ""]
      let id = ""
      await killedThenCut({
        backing,
        state: join(t.path, "cut"),
        args,
        env: { SPOOL_BOOT_ID: "root-id-boot-1", SPOOL_FAULT: "after-claim@1" },
        beforeCut: (root) => {
          id = fs.readFileSync(join(root, ".spool-root-id"), "utf8")
        },
      })
      await using mount = await mountPowerCut(backing, join(t.path, "cut"))
      expect(fs.readFileSync(join(mount.root, ".spool-root-id"), "utf8")).toBe(id)
      const r = await startConsume(mount.root, args, { SPOOL_BOOT_ID: "root-id-boot-2" }).finished
      expect(r.exitCode, r.stderr).toBe(0)
      const actual = await endState(mount.root, cutLedger.url)
      await mount.unmount()
      expect(diffSnapshots(await endState(join(t.path, "reference"), refLedger.url), actual)).toEqual([])
      expect(actual.processing).toEqual({})
    },
    120_000,
  )
})

describe("a power cut after delete returned", () => {
  fuseIt(
    "keeps the file gone and its failure closed: the deletion was durable before it said so",
    async () => {
      // delete unlinks the file and fsyncs error/ before its COMMIT, which is flushed: once it has
      // returned, a cut of everything unsynced undoes neither, and stats no longer counts the failure.
      await using t = await tempDir()
      const backing = join(t.path, "backing")
      const src = join(t.path, "src")
      fs.mkdirSync(src)
      for (const name of fs.readdirSync(join(repoRoot, "fixtures")).filter((n) => n.endsWith(".json")))
        fs.copyFileSync(join(repoRoot, "fixtures", name), join(src, name))
      makeQueueFrom(src, backing)
      const broken = "evt-broken-0001.json"
      const stats = async (root: string) =>
        JSON.parse(
          (await run(["bun", join(repoRoot, "packages/consumer/bin/stats.ts"), "--root", root, "--json"])).stdout,
        ).openFailures
      {
        await using mount = await mountPowerCut(backing, t.path)
        await consumeToEnd(mount.root, [], { SPOOL_BOOT_ID: "delete-boot-1" })
        expect(fs.readdirSync(join(mount.root, "error"))).toContain(broken)
        const deleted = await run(["bun", join(repoRoot, "scripts/delete.ts"), "--root", mount.root, broken])
        expect(deleted.exitCode, deleted.stderr).toBe(0)
        await mount.cut({ kind: "all" })
        await mount.unmount()
      }
      await using mount = await mountPowerCut(backing, t.path)
      expect(fs.readdirSync(join(mount.root, "error"))).not.toContain(broken)
      expect(JSON.stringify(await stats(mount.root))).not.toContain("parse")
      await mount.unmount()
    },
    120_000,
  )
})

describe("power cuts of deferred messages", () => {
  fuseIt(
    "three consumers whose handler defers a third of the messages twice: each effect once, nothing left deferred",
    async () => {
      // test/apps/flaky.ts: a TransientError for a flaky message until it has been deferred twice
      // (due at once each time), then a row in `applied`, in the commit's transaction. Pickups
      // from deferred/ are cut as claims from inbox/ are.
      const { expected, actual, diff, applied, deferredLeft } = await storm({
        messages: 900,
        seed: 38,
        consumers: 3,
        cuts: 6,
        modes: "both",
        bin: join(import.meta.dir, "apps", "flaky.ts"),
      })
      expect(diff).toEqual([])
      expect(actual.failures).toEqual(expected.failures)
      expect(applied?.applied).toEqual(applied?.processed ?? [])
      expect(applied?.processed.length).toBeGreaterThan(500)
      expect(applied?.deferrals).toBe(0)
      expect(deferredLeft).toEqual([])
    },
    600_000,
  )
})

describe("power cuts of a queue whose ledger is on PostgreSQL", () => {
  pgFuseIt(
    "three consumers, cuts of both kinds, the server never losing power: the state of one clean run",
    async () => {
      const { expected, actual, where, diff } = await storm({
        messages: 1000,
        seed: 35,
        consumers: 3,
        cuts: 6,
        modes: "both",
        postgres: true,
      })
      expect(diff).toEqual([])
      expect(actual.failures).toEqual(expected.failures)
      expect(where.cuts).toBeGreaterThanOrEqual(2)
    },
    600_000,
  )
})

describe("power cuts with --no-fsync", () => {
  fuseIt(
    "lose effects or apply messages twice, as the docs say --no-fsync risks",
    async () => {
      // The same storm as above, consume run with --no-fsync: commits are not flushed and
      // renames not made durable, so a cut keeps some of each. Found, by the seed's cuts: files in
      // done/ whose processed row is gone (an effect lost), messages back in inbox/ or
      // processing/ after their commit and recorded again as duplicates of themselves, or a
      // ledger lost whole beside done/ files, which consume refuses to start on. Cuts that lose
      // every unsynced change would find nothing: with --no-fsync nothing is flushed mid-run, so
      // such a cut takes the queue back to where it was. The loss needs a machine that flushed
      // part of its page cache before it died, as a real one does every few seconds.
      let found: Awaited<ReturnType<typeof storm>>
      try {
        found = await storm({ messages: 1200, seed: 36, args: ["--no-fsync"], consumers: 1, cuts: 6, modes: "subset" })
      } catch (error) {
        // A cut that kept moves into done/ and lost the ledger's every commit, its schema with
        // them: consume sees the history gone and refuses to start (exit 2) rather than take the
        // queue's messages again. The loss is found.
        expect(String(error)).toContain("refusing to start a new ledger")
        return
      }
      const { expected, actual, diff } = found
      expect(diff).not.toEqual([])
      const lost = effectsLost(expected, actual)
      const twice = doubled(expected, actual)
      console.log(`power-cut --no-fsync: ${lost.length} effects lost, ${twice.length} messages taken twice`)
      expect(lost.length + twice.length).toBeGreaterThan(0)
    },
    600_000,
  )

  fuseIt(
    "after a run that ended, lose every move its commits outlived: each message is taken again as its own duplicate",
    async () => {
      // Closing the ledger checkpoints it, and a checkpoint fsyncs even at synchronous=NORMAL: the
      // run's commits are on disk, its renames, never fsynced, are not. With fsyncs on, the same
      // cut loses nothing, the reports included.
      const cutAfterRun = (args: string[]) =>
        storm({ messages: 300, seed: 37, args, consumers: 1, cuts: 1, modes: "all", cutAt: "end" })
      const durable = await cutAfterRun([])
      expect(durable.diff).toEqual([])
      expect(durable.run.cuts[0]?.afterRun).toBe(true)
      expect(durable.run.cuts[0]?.reports).toEqual({
        dupTxt: durable.expected.dupTxt,
        errorCsv: durable.expected.errorCsv,
      })
      const { expected, actual } = await cutAfterRun(["--no-fsync"])
      expect(doubled(expected, actual).length).toBe(expected.processed.length)
      expect(actual.inbox).toEqual({})
    },
    600_000,
  )
})
