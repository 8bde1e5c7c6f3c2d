// `bun run bench [--messages N] [--runs R] [--million] [--cold] [--consumers K] [--only LIST] [--watch-seconds S] [--keep]`
//
// Generates a queue of N messages (about 5% duplicates, 1% bad files) in a temp directory,
// then, for each run, gives each contender a fresh copy of that inbox and times it as a
// separate process: `consume` (durable, default batch size), the per-message-commit baselines
// (bench/baseline.ts with SQLite's default settings, and with WAL), the raw floors in C
// (bench/floor.c, one thread, and bench/floor-2t.c, the same work pipelined over two), each
// message's two renames alone (bench/renames.c, on one thread and on two), and consume while
// `spool serve` answers 50 requests/s on the same root.
// Every end state is checked.
// Prints a Markdown table of medians and writes all figures to bench/results/<date>-<N>.json.
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { brokerContenders } from "./brokers.ts"
import { buildFloor, type Measured, runOne } from "./contenders.ts"
import { fmt } from "./figures.ts"
import { generate } from "./generated-queue.ts"
import { describeMachine } from "./machine.ts"
import { measureStartup } from "./ops-startup.ts"
import { parseOptions } from "./options.ts"
import { report } from "./report.ts"
import { sh } from "./shell.ts"
import { measureWatch, type WatchLatency } from "./watch-latency.ts"

const options = parseOptions(process.argv.slice(2))
const { messages: N, runs, consumers, watchSeconds, only, cold } = options

buildFloor()
const base = fs.mkdtempSync(join(os.tmpdir(), "spool-bench-"))
const master = join(base, "master-inbox")
fs.mkdirSync(master)
const machine = describeMachine(base)
process.stderr.write(`bench: ${N} messages in ${base} (${machine.filesystem}); generating...\n`)
const t0 = performance.now()
const expected = generate(master, N)
sh("sync", [])
process.stderr.write(
  `bench: generated in ${fmt((performance.now() - t0) / 1000)} s: ${expected.distinct} distinct, ${expected.duplicates} duplicates, ${expected.bad} bad\n`,
)

const startup = measureStartup(base)
const results: Measured[] = []
const watch: WatchLatency[] = []
try {
  for (let r = 1; r <= runs; r++) {
    for (const c of [
      "consume",
      "consume-served",
      "consume-1t",
      "floor",
      "floor-2t",
      "renames",
      "renames-2t",
      "baseline",
      "baseline-wal",
      "consume-pg",
      ...brokerContenders,
    ])
      if (only.has(c)) results.push(await runOne(c, r, base, master, expected, 1, cold))
    if (consumers > 1 && only.has("consume"))
      results.push(await runOne(`consume-x${consumers}`, r, base, master, expected, consumers, cold))
    if (consumers > 1 && only.has("consume-pg"))
      results.push(await runOne(`consume-pg-x${consumers}`, r, base, master, expected, consumers, cold))
  }
  if (only.has("watch") && watchSeconds > 0)
    for (const rate of options.watchRates) {
      const w = await measureWatch(base, watchSeconds, rate)
      watch.push(w)
      process.stderr.write(
        `bench: watch: ${w.messages} messages at ${fmt(w.rate, 0)}/s, arrival to done/ p50 ${fmt(w.p50Ms)} ms p99 ${fmt(w.p99Ms)} ms max ${fmt(w.maxMs)} ms\n`,
      )
    }
} finally {
  if (!options.keep) fs.rmSync(base, { recursive: true, force: true })
  else process.stderr.write(`bench: data kept in ${base}\n`)
}

report({
  options,
  command: `bun run bench ${process.argv.slice(2).join(" ")}`.trim(),
  machine,
  expected,
  startup,
  watch,
  results,
})
