// `bun run torture [--iterations N] [--messages M] [--seed S] ...`: the random-kill crash
// equivalence check of test/crash.test.ts, for as long as asked. Each iteration generates a
// queue, runs it once uninterrupted, runs a copy under random SIGKILLs until drained, and
// compares the two end states. Prints what it tried and what it found; exit 1 on divergence.
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import {
  consumeWithRandomKills,
  diffIgnoringWinners,
  diffSnapshots,
  generateMessages,
  makeQueueFrom,
  rng,
  summarizeKills,
  timeConsume,
} from "../test/_chaos.ts"
import { snapshot } from "../test/support.ts"

const usage = `Usage: bun run torture [options]

Kills the real consume process with SIGKILL at random points over a generated queue until it
is drained, and checks that the end state equals one uninterrupted run's, iteration after
iteration. Exit 0 when every iteration matched, 1 on any divergence, 2 on bad arguments.

Options:
  --iterations N     iterations to run (default 3)
  --messages M       messages per generated queue (default 2000)
  --seed S           first seed; iteration i uses S+i (default: from the clock, printed)
  --batch-size B     consume --batch-size (default 25)
  --kills K          most kills per iteration (default 30)
  --budget SECONDS   most time spent killing per iteration (default 60)
  --active-ms MS     kills land within this long after a run starts changing the queue
                     (default: an eighth of the time the uninterrupted run worked)
  --max-attempts N   consume --max-attempts (default 1000: random kills can hit one message
                     while it is retried alone, which is what poison looks like)
  --consumers C      consumers started together in each round (default 1); with more, only
                     which delivery of a redelivered msg_id wins may differ
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
      "max-attempts": { type: "string", default: "1000" },
      consumers: { type: "string", default: "1" },
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
    maxAttempts: int("max-attempts", 1),
    consumers: int("consumers", 1),
    keep: values.keep === true,
    help: values.help === true,
  }
}

async function torture(o: ReturnType<typeof parse>): Promise<number> {
  const args = ["--batch-size", String(o.batchSize), "--max-attempts", String(o.maxAttempts)]
  console.log(
    `torture: ${o.iterations} iteration(s) of ${o.messages} messages, seeds ${o.seed}..${o.seed + o.iterations - 1}, ` +
      `consume ${args.join(" ")}, ${o.consumers} consumer(s) per round, up to ${o.kills} kills or ${o.budgetMs / 1000} s each`,
  )
  let diverged = 0
  const totals = { kills: 0, inFlight: 0, committedNotMoved: 0, idle: 0, starts: 0 }
  for (let i = 0; i < o.iterations; i++) {
    const seed = o.seed + i
    const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-torture-"))
    const started = performance.now()
    const mix = generateMessages(join(dir, "src"), o.messages, seed)
    makeQueueFrom(join(dir, "src"), join(dir, "reference"))
    makeQueueFrom(join(dir, "src"), join(dir, "killed"))
    const reference = await timeConsume(join(dir, "reference"), args)
    const activeMs = o.activeMs ?? Math.max(20, Math.round(reference.activeMs / 8))
    let run: Awaited<ReturnType<typeof consumeWithRandomKills>>
    try {
      run = await consumeWithRandomKills(join(dir, "killed"), {
        random: rng(seed),
        args,
        maxKills: o.kills,
        budgetMs: o.budgetMs,
        activeMs,
        consumers: o.consumers,
      })
    } catch (error) {
      // A run that failed on its own (not killed) is a finding too: say what it printed.
      diverged++
      const text = error instanceof Error ? error.message : String(error)
      console.log(
        `iteration ${i + 1}/${o.iterations} seed=${seed}: FAILED\n  ${text.split("\n").slice(-6).join("\n  ")}`,
      )
      console.log(`  queues kept in ${dir} (reference/ and killed/)`)
      continue
    }
    const expected = snapshot(join(dir, "reference"))
    const actual = snapshot(join(dir, "killed"))
    const diff = o.consumers > 1 ? diffIgnoringWinners(expected, actual) : diffSnapshots(expected, actual)
    const k = summarizeKills(run.kills)
    for (const key of ["kills", "inFlight", "committedNotMoved", "idle"] as const) totals[key] += k[key]
    totals.starts += run.starts
    const seconds = ((performance.now() - started) / 1000).toFixed(1)
    console.log(
      `iteration ${i + 1}/${o.iterations} seed=${seed} (${mix.valid} valid, ${mix.sameDuplicate + mix.reformattedDuplicate} duplicates, ` +
        `${mix.conflict} conflicts, ${mix.badJson + mix.missingField + mix.invalidField} bad): ${run.starts} runs, ${k.kills} kills ` +
        `(${k.inFlight} with a batch in hand, ${k.committedNotMoved} between commit and move, ${k.idle} with nothing in flight), ` +
        `kill window ${activeMs} ms, ${seconds} s: ${diff.length === 0 ? "equivalent" : "DIVERGED"}`,
    )
    if (diff.length > 0) {
      diverged++
      for (const line of diff) console.log(`  ${line}`)
      console.log(`  queues kept in ${dir} (reference/ and killed/)`)
    } else if (!o.keep) fs.rmSync(dir, { recursive: true, force: true })
  }
  console.log(
    `torture: ${o.iterations - diverged}/${o.iterations} iterations equivalent; ${totals.starts} runs, ${totals.kills} kills ` +
      `(${totals.inFlight} with a batch in hand, ${totals.committedNotMoved} between commit and move, ${totals.idle} idle)`,
  )
  return diverged === 0 ? 0 : 1
}

process.exitCode = await main(process.argv.slice(2))
