// `bun run torture [--iterations N] [--messages N] [--seed N] ...`: the random-kill crash
// equivalence check of test/crash.test.ts and test/kill-storm.test.ts, for as long as asked.
// Each iteration generates a queue, runs it once uninterrupted, runs a copy under rounds of
// consumers SIGKILLed at random until drained, and compares the two end states, on each ledger
// backend asked for. With --power-cut, test/power-cut.test.ts's check instead: the copy is on
// the power-cut file system, and each round's kill is followed by a power cut. Prints what it
// tried and what it found; exit 1 on divergence.
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { type CommandSpec, choice, duration, flag, integer, runCommand } from "@spool/cli"
import {
  type CutObservation,
  cutAgainstReference,
  cutLog,
  diffIgnoringWinners,
  diffSnapshots,
  generateMessages,
  killedAgainstReference,
  killLog,
  pgUnavailable,
  powerCutUnavailable,
  summarizeCuts,
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
    "With --power-cut, each kill is followed by a power cut of the file system the queue is on\n" +
    "(a FUSE mount that loses everything not fsynced), then a reboot.\n" +
    "Exit 0 when every iteration matched, 1 on any divergence, 2 on bad arguments or when a\n" +
    "PostgreSQL iteration finds no server (or --power-cut no FUSE).",
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
    "power-cut": flag(
      "cut the power instead of only killing: the queue (and a SQLite ledger) on the power-cut file system (FUSE), everything not fsynced lost at each cut",
    ),
    cuts: integer("with --power-cut, most cuts per iteration", { default: "8", min: 1 }),
    "cut-mode": choice(
      "M",
      ["all", "subset", "both"],
      "with --power-cut, what a cut loses: every unsynced change, a random part of them, or each in turn",
      { default: "both" },
    ),
    "no-fsync": flag("run consume with --no-fsync (with --power-cut, expect divergences: that is what it risks)"),
  },
  exitCodes: [0, 1, 2, 3],
  examples: [
    { args: "--iterations 20 --backend sqlite", does: "twenty iterations on the SQLite ledger" },
    { args: "--seed 1234 --iterations 1 --keep", does: "replay one iteration by its printed seed, keeping its queues" },
    {
      args: "--power-cut --iterations 20 --backend sqlite",
      does: "twenty iterations of power cuts on the SQLite ledger",
    },
  ],
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
      powerCut: v["power-cut"] ? { cuts: v.cuts, mode: v["cut-mode"] } : undefined,
      noFsync: v["no-fsync"],
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
  readonly powerCut: { readonly cuts: number; readonly mode: "all" | "subset" | "both" } | undefined
  readonly noFsync: boolean
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
    ...(o.noFsync ? ["--no-fsync"] : []),
  ]
  if (o.powerCut !== undefined) {
    const why = await powerCutUnavailable()
    if (why !== undefined) {
      process.stderr.write(
        `torture: ${why}\n--power-cut needs FUSE: fuse3 and libfuse3-dev installed, /dev/fuse usable.\n`,
      )
      return 2
    }
  }
  if (o.backends.includes("postgres")) {
    const why = await pgUnavailable()
    if (why !== undefined) {
      process.stderr.write(`torture: ${why}\nRun with --backend sqlite to torture the SQLite ledger alone.\n`)
      return 2
    }
  }
  console.log(
    `torture: ${o.iterations} iteration(s) per backend (${o.backends.join(", ")}) of ${o.messages} messages, seeds ${o.seed}..${o.seed + o.iterations - 1}, ` +
      `consume ${args.join(" ")}, ${o.consumers} consumer(s) per round, ` +
      (o.powerCut === undefined
        ? `up to ${o.kills} kills or ${o.budgetMs / 1000} s each`
        : `up to ${o.powerCut.cuts} power cuts each (${o.powerCut.mode === "both" ? "all and subset in turn" : o.powerCut.mode})`),
  )
  let diverged = 0
  const totals = { kills: 0, inFlight: 0, committedNotMoved: 0, idle: 0, starts: 0 }
  const cutTotals = { ...summarizeCuts([]) }
  const all = o.backends.flatMap((backend) => Array.from({ length: o.iterations }, (_, i) => ({ backend, i })))
  for (const { backend, i } of all) {
    const seed = o.seed + i
    const label = `${backend} iteration ${i + 1}/${o.iterations} seed=${seed}`
    const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-torture-"))
    const refLedger = await ledgerFor(backend)
    const killedLedger = await ledgerFor(backend)
    const started = performance.now()
    const mix = generateMessages(join(dir, "src"), o.messages, seed)
    if (o.powerCut !== undefined) {
      const found = await cutIteration(o, o.powerCut, {
        dir,
        args,
        seed,
        backend,
        label,
        refLedger,
        cutLedger: killedLedger,
      })
      for (const key of Object.keys(cutTotals) as (keyof typeof cutTotals)[]) cutTotals[key] += found.where[key]
      totals.starts += found.starts
      if (!found.isEquivalent) {
        diverged++
        continue
      }
    } else {
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
    }
    if (!o.keep) fs.rmSync(dir, { recursive: true, force: true })
    await refLedger[Symbol.asyncDispose]()
    await killedLedger[Symbol.asyncDispose]()
  }
  if (o.powerCut !== undefined)
    console.log(
      `torture: ${all.length - diverged}/${all.length} iterations equivalent; ${totals.starts} runs, ${cutsLine(cutTotals)}`,
    )
  else
    console.log(
      `torture: ${all.length - diverged}/${all.length} iterations equivalent; ${totals.starts} runs, ${totals.kills} kills ` +
        `(${totals.inFlight} with a batch in hand, ${totals.committedNotMoved} between commit and move, ${totals.idle} idle)`,
    )
  return diverged === 0 ? 0 : 1
}

/** Where a number of cuts landed, as one line. */
function cutsLine(w: ReturnType<typeof summarizeCuts>): string {
  return (
    `${w.cuts} cuts (${w.claimsUndone} undid claims' renames, ${w.movesUndone} undid moves, ${w.ledgerWritesLost} lost ledger writes, ` +
    `${w.claimsSurvived} left claims to recover, ${w.orphansLeft} left orphans, ${w.afterRun} after a run's end, ${w.nothingLost} lost nothing)`
  )
}

/**
 * One power-cut iteration: the generated queue consumed once on a plain directory, and a copy
 * on the power-cut file system under cuts; prints what the cuts caught and whether the end
 * states match. Returns where the cuts landed and the runs started.
 */
async function cutIteration(
  o: Settings,
  p: NonNullable<Settings["powerCut"]>,
  i: {
    dir: string
    args: string[]
    seed: number
    backend: Backend
    label: string
    refLedger: { url: string | undefined }
    cutLedger: { url: string | undefined }
  },
): Promise<{ isEquivalent: boolean; where: ReturnType<typeof summarizeCuts>; starts: number }> {
  const started = performance.now()
  let checked: Awaited<ReturnType<typeof cutAgainstReference>>
  try {
    checked = await cutAgainstReference({
      dir: i.dir,
      args: i.args,
      seed: i.seed,
      consumers: o.consumers,
      cuts: p.cuts,
      modeOf: (n) => (p.mode === "both" ? (n % 2 === 0 ? "all" : "subset") : p.mode),
      activeMs: (ms) => o.activeMs ?? Math.max(50, Math.round(ms * (o.consumers > 1 ? 0.5 : 0.3))),
      ledgers: { reference: i.refLedger.url, cut: i.cutLedger.url },
      newLedger: () => ledgerFor(i.backend),
    })
  } catch (error) {
    const text = error instanceof Error ? error.message : String(error)
    console.log(`${i.label}: FAILED\n  ${text.split("\n").slice(-6).join("\n  ")}`)
    console.log(`  queues kept in ${i.dir} (reference/ and cut/backing/)${ledgersKept(i.refLedger, i.cutLedger)}`)
    return { isEquivalent: false, where: summarizeCuts([]), starts: 0 }
  }
  const { expected, actual, run, activeMs, poisonedByKills } = checked
  const diff = o.consumers > 1 ? diffIgnoringWinners(expected, actual) : diffSnapshots(expected, actual)
  const where = summarizeCuts(run.cuts as CutObservation[])
  const seconds = ((performance.now() - started) / 1000).toFixed(1)
  console.log(
    `${i.label} power cuts: ${run.starts} runs, ${cutsLine(where)}, cut window ${Math.round(activeMs)} ms, ${seconds} s: ` +
      `${diff.length === 0 ? "equivalent" : "DIVERGED"}` +
      (poisonedByKills.length > 0 ? ` (${poisonedByKills.join(", ")} poison by design)` : ""),
  )
  if (diff.length === 0) return { isEquivalent: true, where, starts: run.starts }
  for (const line of diff) console.log(`  ${line}`)
  for (const line of cutLog(run.cuts)) console.log(`  ${line}`)
  console.log(`  queues kept in ${i.dir} (reference/ and cut/backing/)${ledgersKept(i.refLedger, i.cutLedger)}`)
  return { isEquivalent: false, where, starts: run.starts }
}

process.exitCode = await main(process.argv.slice(2))
