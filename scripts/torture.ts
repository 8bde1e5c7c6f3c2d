// `bun run torture [--iterations N] [--messages N] [--seed N] ...`: the random-kill crash
// equivalence check of test/crash.test.ts and test/kill-storm.test.ts, for as long as asked.
// Each iteration generates a queue, runs it once uninterrupted, runs a copy under rounds of
// consumers SIGKILLed at random until drained, and compares the two end states, on each ledger
// backend asked for. Prints what it tried and what it found; exit 1 on divergence.
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { type CommandSpec, choice, duration, flag, integer, runCommand } from "@spool/cli"
import {
  diffIgnoringWinners,
  diffSnapshots,
  generateMessages,
  killedAgainstReference,
  killLog,
  pgUnavailable,
  summarizeKills,
  tempDatabase,
} from "@spool/test-support"

/** `bun run torture`'s options and help. */
const spec = {
  name: "torture",
  usage: "bun run torture [options]",
  summary: "The random-kill crash check, over generated queues, for as long as asked.",
  description:
    "Kills real consume processes with SIGKILL at random points over a generated queue until it is\n" +
    "drained, and checks that the end state equals one uninterrupted run's, iteration after\n" +
    "iteration, on each ledger backend. consume runs with its own defaults but for --batch-size.\n" +
    "Exit 0 when every iteration matched, 1 on any divergence, 2 on bad arguments or when a\n" +
    "PostgreSQL iteration finds no server.",
  options: {
    iterations: integer("iterations per backend", { default: "3", min: 1 }),
    messages: integer("messages per generated queue", { default: "2000", min: 1 }),
    seed: integer("first seed; iteration i uses N+i", { fallback: "from the clock, printed" }),
    backend: choice(
      "B",
      ["sqlite", "postgres", "both"],
      "sqlite, postgres or both; PostgreSQL is the server of SPOOL_TEST_PG_URL (postgres://postgres@127.0.0.1:5432/test when unset), a fresh database per queue",
      { default: "both" },
    ),
    consumers: integer(
      "consumers started together in each round; with more than one, only which delivery of a redelivered msg_id wins may differ",
      { default: "3", min: 1 },
    ),
    "batch-size": integer("consume --batch-size", { default: "25", min: 1 }),
    "max-attempts": integer("consume --max-attempts", { fallback: "consume's own, 3", min: 1 }),
    kills: integer("most kills per iteration", { default: "30" }),
    budget: duration("most time spent killing per iteration", { default: "60s", min: 1 }),
    "active-ms": integer(
      "kills land within this many milliseconds after a round starts changing the queue (default: an eighth of the time the uninterrupted run worked, less with more consumers)",
      { min: 1 },
    ),
    keep: flag("keep every iteration's queues (a diverging one's are always kept)"),
  },
} satisfies CommandSpec

type Backend = "sqlite" | "postgres"

/** `bun run torture`: the random-kill check, iteration after iteration. */
function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, ({ values: v }) =>
    torture({
      iterations: v.iterations,
      messages: v.messages,
      seed: v.seed ?? Date.now() % 1_000_000,
      batchSize: v["batch-size"],
      kills: v.kills,
      budgetMs: v.budget,
      activeMs: v["active-ms"],
      maxAttempts: v["max-attempts"],
      consumers: v.consumers,
      backends: v.backend === "both" ? ["sqlite", "postgres"] : [v.backend],
      keep: v.keep,
    }),
  )
}

interface Settings {
  readonly iterations: number
  readonly messages: number
  readonly seed: number
  readonly batchSize: number
  readonly kills: number
  readonly budgetMs: number
  readonly activeMs: number | undefined
  readonly maxAttempts: number | undefined
  readonly consumers: number
  readonly backends: readonly Backend[]
  readonly keep: boolean
}

/** A root's ledger for one run: none to make for SQLite (it lives in the root), a fresh database for PostgreSQL. */
async function ledgerFor(backend: Backend): Promise<{ url: string | undefined } & AsyncDisposable> {
  if (backend === "postgres") return tempDatabase()
  return { url: undefined, async [Symbol.asyncDispose]() {} }
}

/** Where a diverging iteration's PostgreSQL ledgers are kept, for a look with psql. */
function ledgersKept(reference: { url: string | undefined }, killed: { url: string | undefined }): string {
  return killed.url === undefined ? "" : `; ledgers kept: reference ${reference.url}, killed ${killed.url}`
}

async function torture(o: Settings): Promise<number> {
  const args = [
    "--batch-size",
    String(o.batchSize),
    ...(o.maxAttempts === undefined ? [] : ["--max-attempts", String(o.maxAttempts)]),
  ]
  if (o.backends.includes("postgres")) {
    const why = await pgUnavailable()
    if (why !== undefined) {
      process.stderr.write(`torture: ${why}\nRun with --backend sqlite to torture the SQLite ledger alone.\n`)
      return 2
    }
  }
  console.log(
    `torture: ${o.iterations} iteration(s) per backend (${o.backends.join(", ")}) of ${o.messages} messages, seeds ${o.seed}..${o.seed + o.iterations - 1}, ` +
      `consume ${args.join(" ")}, ${o.consumers} consumer(s) per round, up to ${o.kills} kills or ${o.budgetMs / 1000} s each`,
  )
  let diverged = 0
  const totals = { kills: 0, inFlight: 0, committedNotMoved: 0, idle: 0, starts: 0 }
  const all = o.backends.flatMap((backend) => Array.from({ length: o.iterations }, (_, i) => ({ backend, i })))
  for (const { backend, i } of all) {
    const seed = o.seed + i
    const label = `${backend} iteration ${i + 1}/${o.iterations} seed=${seed}`
    const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-torture-"))
    const refLedger = await ledgerFor(backend)
    const killedLedger = await ledgerFor(backend)
    const started = performance.now()
    const mix = generateMessages(join(dir, "src"), o.messages, seed)
    let checked: Awaited<ReturnType<typeof killedAgainstReference>>
    try {
      checked = await killedAgainstReference({
        dir,
        args,
        seed,
        consumers: o.consumers,
        maxKills: o.kills,
        budgetMs: o.budgetMs,
        activeMs: (ms) => o.activeMs ?? Math.max(20, Math.round(ms / (o.consumers > 1 ? 2.5 : 8))),
        ledgers: { reference: refLedger.url, killed: killedLedger.url },
        newLedger: () => ledgerFor(backend),
        ...(o.maxAttempts !== undefined && { maxAttempts: o.maxAttempts }),
      })
    } catch (error) {
      // A run that failed on its own (not killed) is a finding too: say what it printed.
      diverged++
      const text = error instanceof Error ? error.message : String(error)
      console.log(`${label}: FAILED\n  ${text.split("\n").slice(-6).join("\n  ")}`)
      console.log(`  queues kept in ${dir} (reference/ and killed/)${ledgersKept(refLedger, killedLedger)}`)
      continue
    }
    const { expected, actual, run, activeMs, poisonedByKills } = checked
    const diff = o.consumers > 1 ? diffIgnoringWinners(expected, actual) : diffSnapshots(expected, actual)
    const k = summarizeKills(run.kills)
    for (const key of ["kills", "inFlight", "committedNotMoved", "idle"] as const) totals[key] += k[key]
    totals.starts += run.starts
    const seconds = ((performance.now() - started) / 1000).toFixed(1)
    console.log(
      `${label} (${mix.valid} valid, ${mix.sameDuplicate + mix.reformattedDuplicate} duplicates, ` +
        `${mix.conflict} conflicts, ${mix.badJson + mix.missingField + mix.invalidField} bad): ${run.starts} runs, ${k.kills} kills ` +
        `(${k.inFlight} with a batch in hand, ${k.committedNotMoved} between commit and move, ${k.idle} with nothing in flight), ` +
        `kill window ${activeMs} ms, ${seconds} s: ${diff.length === 0 ? "equivalent" : "DIVERGED"}` +
        (poisonedByKills.length > 0
          ? ` (${poisonedByKills.join(", ")} in hand at enough kills each to be poison by design, as in a run they crash)`
          : ""),
    )
    if (diff.length > 0) {
      diverged++
      for (const line of diff) console.log(`  ${line}`)
      for (const line of killLog(run.kills)) console.log(`  ${line}`)
      console.log(`  queues kept in ${dir} (reference/ and killed/)${ledgersKept(refLedger, killedLedger)}`)
      continue
    }
    if (!o.keep) fs.rmSync(dir, { recursive: true, force: true })
    await refLedger[Symbol.asyncDispose]()
    await killedLedger[Symbol.asyncDispose]()
  }
  console.log(
    `torture: ${all.length - diverged}/${all.length} iterations equivalent; ${totals.starts} runs, ${totals.kills} kills ` +
      `(${totals.inFlight} with a batch in hand, ${totals.committedNotMoved} between commit and move, ${totals.idle} idle)`,
  )
  return diverged === 0 ? 0 : 1
}

process.exitCode = await main(process.argv.slice(2))
