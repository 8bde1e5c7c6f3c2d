// Consumers SIGKILLed at random, one or several on one root, at the settings a user gets (the
// default --max-attempts above all): the end state must be the one a single uninterrupted run
// reaches, on both ledgers. With several consumers only which delivery of a redelivered msg_id
// commits first may differ.

import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  diffIgnoringWinners,
  diffSnapshots,
  generateMessages,
  killedAgainstReference,
  killLog,
  pgUnavailable,
  summarizeKills,
  tempDatabase,
  tempDir,
} from "@spool/test-support"

const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)

/** A ledger for one root: SQLite in the root, or a fresh PostgreSQL database. */
interface Backend {
  readonly name: string
  readonly skip: string | undefined
  ledger(): Promise<{ url: string | undefined } & AsyncDisposable>
}

// A storm is bounded by its kills (at most 40 s of them), but its wall time grows with the
// machine's load: a reference run, the killed runs and a final run, several processes at once.
// Seen past 120 s on a 2-core machine loaded tenfold; each storm's limit, 600 s, only catches a
// hang.

const backends: Backend[] = [
  { name: "SQLite", skip: undefined, ledger: async () => ({ url: undefined, async [Symbol.asyncDispose]() {} }) },
  { name: "PostgreSQL", skip: pgSkip, ledger: tempDatabase },
]

for (const backend of backends)
  (backend.skip ? describe.skip : describe)(`random kills of consumers, ${backend.name} ledger`, () => {
    /**
     * Generates `messages`, runs one copy once uninterrupted and another under rounds of
     * `consumers` processes killed at random, and returns both end states and the kills.
     */
    async function storm(o: {
      messages: number
      seed: number
      args: string[]
      consumers: number
      maxKills: number
      /** Kills the test asks for: taken past the time budget if need be. */
      minKills: number
      env?: Record<string, string>
      /** An application to run instead of the consume command (see startConsume). */
      bin?: string
      /** Called with the killed run's root and ledger before they are removed. */
      inspect?: (killed: { root: string; url: string | undefined }) => Promise<void>
    }) {
      await using t = await tempDir()
      await using refLedger = await backend.ledger()
      await using killedLedger = await backend.ledger()
      generateMessages(join(t.path, "src"), o.messages, o.seed)
      const { expected, actual, run, poisonedByKills } = await killedAgainstReference({
        dir: t.path,
        args: o.args,
        seed: o.seed,
        consumers: o.consumers,
        maxKills: o.maxKills,
        minKills: o.minKills,
        budgetMs: 40_000,
        // Several consumers drain the queue faster than the one the reference ran; one alone
        // gets kills landing, on average, a sixteenth of its work after each restart.
        activeMs: (ms) => Math.max(50, ms * (o.consumers > 1 ? 0.4 : 0.125)),
        ledgers: { reference: refLedger.url, killed: killedLedger.url },
        newLedger: backend.ledger,
        ...(o.env !== undefined && { env: o.env }),
        ...(o.bin !== undefined && { bin: o.bin }),
      })
      await o.inspect?.({ root: join(t.path, "killed"), url: killedLedger.url })
      // The kill times come from the seed, where they land from the machine: what each kill
      // caught is the evidence a divergence leaves.
      const diff = o.consumers > 1 ? diffIgnoringWinners(expected, actual) : diffSnapshots(expected, actual)
      if (diff.length > 0)
        console.warn(
          [`kill-storm diverged, seed ${o.seed}, ${run.starts} runs:`, ...diff, ...killLog(run.kills)].join("\n  "),
        )
      if (poisonedByKills.length > 0)
        console.warn(`kill-storm: ${poisonedByKills.join(", ")} in hand at two kills each, so poison by design`)
      const kills = summarizeKills(run.kills)
      console.log(
        `kill-storm: seed ${o.seed}, ${run.starts} runs, ${kills.kills} kills (${kills.inFlight} with a batch in hand, ` +
          `${kills.committedNotMoved} between commit and move): ${diff.length === 0 ? "equivalent" : "DIVERGED"}`,
      )
      return { expected, actual, kills, poisonedByKills }
    }

    it("one consumer in batches of 25, default --max-attempts: exactly the state of one clean run", async () => {
      const { expected, actual, kills } = await storm({
        messages: 2000,
        seed: 20261129,
        args: ["--batch-size", "25"],
        consumers: 1,
        maxKills: 25,
        minKills: 5,
      })
      // One consumer: the same delivery of each msg_id wins, so every row is equal as is.
      expect(diffSnapshots(expected, actual)).toEqual([])
      expect(kills.kills).toBeGreaterThanOrEqual(5)
      expect(kills.inFlight + kills.committedNotMoved).toBeGreaterThanOrEqual(1)
    }, 600_000)

    it("three consumers in batches of 25, default --max-attempts: the state of one clean run", async () => {
      const { expected, actual, kills } = await storm({
        messages: 6000,
        seed: 14,
        args: ["--batch-size", "25"],
        consumers: 3,
        maxKills: 24,
        minKills: 6,
      })
      expect(diffIgnoringWinners(expected, actual)).toEqual([])
      expect(actual.failures).toEqual(expected.failures)
      expect(kills.kills).toBeGreaterThanOrEqual(6)
      expect(kills.inFlight + kills.committedNotMoved).toBeGreaterThanOrEqual(1)
    }, 600_000)

    it("three consumers with no options at all: the state of one clean run", async () => {
      const { expected, actual, kills } = await storm({
        messages: 5000,
        seed: 15,
        args: [],
        consumers: 3,
        maxKills: 12,
        minKills: 3,
      })
      expect(diffIgnoringWinners(expected, actual)).toEqual([])
      expect(actual.failures).toEqual(expected.failures)
      expect(kills.kills).toBeGreaterThanOrEqual(3)
    }, 600_000)

    it("three consumers whose handler defers a third of the messages twice: each effect once, the state of one clean run", async () => {
      // test/apps/flaky.ts: a TransientError for a flaky message until it has been deferred
      // twice (due at once each time), then a row in `applied`, in the commit's transaction.
      const seen: { applied: string[]; processed: string[]; deferred: string[]; rows: number }[] = []
      const { expected, actual, kills } = await storm({
        messages: 1500,
        seed: 17,
        args: ["--batch-size", "25"],
        consumers: 3,
        maxKills: 12,
        minKills: 3,
        bin: join(import.meta.dir, "apps", "flaky.ts"),
        inspect: async ({ root, url }) => {
          const deferred = fs.existsSync(join(root, "deferred")) ? fs.readdirSync(join(root, "deferred")) : []
          if (url === undefined) {
            const db = new Database(join(root, "ledger.db"), { readonly: true })
            try {
              const ids = (q: string) => (db.query(q).all() as { msg_id: string }[]).map((r) => r.msg_id)
              const rows = (db.query("SELECT count(*) AS n FROM deferrals").get() as { n: number }).n
              seen.push({
                applied: ids("SELECT msg_id FROM applied ORDER BY msg_id"),
                processed: ids("SELECT msg_id FROM processed ORDER BY msg_id"),
                deferred,
                rows,
              })
            } finally {
              db.close()
            }
          } else {
            const sql = new Bun.SQL({ url, max: 1 })
            try {
              const ids = async (q: Promise<{ msg_id: string }[]>) => (await q).map((r) => r.msg_id)
              const [r] = await sql`SELECT count(*)::int AS n FROM deferrals`
              seen.push({
                applied: await ids(sql`SELECT msg_id FROM applied ORDER BY msg_id COLLATE "C"`),
                processed: await ids(sql`SELECT msg_id FROM processed ORDER BY msg_id COLLATE "C"`),
                deferred,
                rows: Number(r?.n),
              })
            } finally {
              await sql.close()
            }
          }
        },
      })
      expect(diffIgnoringWinners(expected, actual)).toEqual([])
      expect(actual.failures).toEqual(expected.failures)
      const [s] = seen
      // Every processed message's effect applied, none twice (the primary key), none extra;
      // nothing left waiting in deferred/ or the ledger.
      expect(s?.applied).toEqual(s?.processed)
      expect(s?.processed.length).toBeGreaterThan(1000)
      expect(s?.deferred).toEqual([])
      expect(s?.rows).toBe(0)
      expect(kills.kills).toBeGreaterThanOrEqual(3)
    }, 600_000)

    it("two files in hand at two kills each: both poison by design, and the state of a run they both crash", async () => {
      // The crash hook stands in for random kills that catch the same two files twice each in
      // their retries: every kill is then one the harness sees, with no timing involved.
      const seed = 18
      await using t = await tempDir()
      generateMessages(join(t.path, "probe"), 200, seed)
      const [first, second] = fs
        .readdirSync(join(t.path, "probe"))
        .sort()
        .filter((n) => fs.readFileSync(join(t.path, "probe", n), "utf8").includes('"order_no"'))
      const crashing = [first, second] as string[]
      const { expected, actual, poisonedByKills } = await storm({
        messages: 200,
        seed,
        args: ["--batch-size", "25"],
        consumers: 1,
        maxKills: 0,
        minKills: 0,
        env: { SPOOL_CRASH_ON: crashing.join("/") },
      })
      expect(poisonedByKills).toEqual(crashing)
      for (const name of crashing)
        expect(actual.failures).toContainEqual({ file: name, original: name, reason: "poison" })
      expect(diffSnapshots(expected, actual)).toEqual([])
    }, 600_000)

    it("a file that crashes every consumer that reads it, amid the kills: poison, and the state of a run it crashes alone", async () => {
      // m-…: the generator's names are random; take one valid message of the queue as poison.
      const seed = 16
      await using t = await tempDir()
      generateMessages(join(t.path, "probe"), 600, seed)
      const poison = fs
        .readdirSync(join(t.path, "probe"))
        .sort()
        .find((n) => fs.readFileSync(join(t.path, "probe", n), "utf8").includes('"order_no"')) as string
      const { expected, actual, poisonedByKills } = await storm({
        messages: 600,
        seed,
        args: ["--batch-size", "25"],
        consumers: 3,
        maxKills: 6,
        minKills: 0,
        env: { SPOOL_CRASH_ON: poison },
      })
      expect(poisonedByKills).toEqual([poison])
      expect(actual.failures).toContainEqual({ file: poison, original: poison, reason: "poison" })
      expect(diffIgnoringWinners(expected, actual)).toEqual([])
    }, 600_000)
  })
