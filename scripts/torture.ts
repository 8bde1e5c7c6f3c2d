// `bun run torture [--iterations N] [--messages M] [--seed S] ...`: the random-kill crash
// equivalence check of test/crash.test.ts and test/kill-storm.test.ts, for as long as asked.
// Each iteration generates a queue, runs it once uninterrupted, runs a copy under rounds of
// consumers SIGKILLed at random until drained, and compares the two end states, on each ledger
// backend asked for. Prints what it tried and what it found; exit 1 on divergence.
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import {
  diffIgnoringWinners,
  diffSnapshots,
  generateMessages,
  killedAgainstReference,
  pgUnavailable,
  summarizeKills,
  tempDatabase,
} from "@spool/test-support"

const usage = `Usage: bun run torture [options]

Kills real consume processes with SIGKILL at random points over a generated queue until it is
drained, and checks that the end state equals one uninterrupted run's, iteration after
iteration, on each ledger backend. consume runs with its own defaults but for --batch-size.
Exit 0 when every iteration matched, 1 on any divergence, 2 on bad arguments or when a
PostgreSQL iteration finds no server.

Options:
  --iterations N     iterations per backend (default 3)
  --messages M       messages per generated queue (default 2000)
  --seed S           first seed; iteration i uses S+i (default: from the clock, printed)
  --backend B        sqlite, postgres or both (default both); PostgreSQL is the server of
                     SPOOL_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test),
                     with a fresh database per queue
  --consumers C      consumers started together in each round (default 3); with more than
                     one, only which delivery of a redelivered msg_id wins may differ
  --batch-size B     consume --batch-size (default 25)
  --max-attempts N   consume --max-attempts (default: consume's own, 3)
  --kills K          most kills per iteration (default 30)
  --budget SECONDS   most time spent killing per iteration (default 60)
  --active-ms MS     kills land within this long after a round starts changing the queue
                     (default: an eighth of the time the uninterrupted run worked, less
                     with more consumers)
  --keep             keep every iteration's queues (a diverging one's are always kept)
  -h, --help         show this help
`

function main(argv: string[]): Promise<number> | number {
  let v: ReturnType<typeof parse>
  try {
    v = parse(argv)
  } catch (error) {
    process.stderr.write(`torture: ${error instanceof Error ? error.message : String(error)}\n${usage}`)
    return 2
  }
  if (v.help) {
    process.stdout.write(usage)
    return 0
  }
  return torture(v)
}

function parse(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      iterations: { type: "string", default: "3" },
      messages: { type: "string", default: "2000" },
      seed: { type: "string" },
      "batch-size": { type: "string", default: "25" },
      kills: { type: "string", default: "30" },
      budget: { type: "string", default: "60" },
      "active-ms": { type: "string" },
      "max-attempts": { type: "string" },
      consumers: { type: "string", default: "3" },
      backend: { type: "string", default: "both" },
      keep: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  })
  const int = (name: keyof typeof values, min: number): number => {
    const text = String(values[name])
    if (!/^\d+$/.test(text) || Number(text) < min) throw new Error(`--${name} takes a whole number >= ${min}`)
    return Number(text)
  }
  return {
    iterations: int("iterations", 1),
    messages: int("messages", 1),
    seed: values.seed === undefined ? Date.now() % 1_000_000 : int("seed", 0),
    batchSize: int("batch-size", 1),
    kills: int("kills", 0),
    budgetMs: int("budget", 1) * 1000,
    activeMs: values["active-ms"] === undefined ? undefined : int("active-ms", 1),
    maxAttempts: values["max-attempts"] === undefined ? undefined : int("max-attempts", 1),
    consumers: int("consumers", 1),
    backends: backendsOf(String(values.backend)),
    keep: values.keep === true,
    help: values.help === true,
  }
}

type Backend = "sqlite" | "postgres"

function backendsOf(text: string): Backend[] {
  if (text === "both") return ["sqlite", "postgres"]
  if (text === "sqlite" || text === "postgres") return [text]
  throw new Error(`--backend takes sqlite, postgres or both, not ${JSON.stringify(text)}`)
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

async function torture(o: ReturnType<typeof parse>): Promise<number> {
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
          ? ` (${poisonedByKills.join(", ")} was in hand at enough kills to be poison by design, as in a run it crashes)`
          : ""),
    )
    if (diff.length > 0) {
      diverged++
      for (const line of diff) console.log(`  ${line}`)
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
