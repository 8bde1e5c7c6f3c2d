// The bench's output: medians and ratios per contender, every figure in
// bench/results/<date>-<N>.json, and the Markdown table on stdout.
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { describeLoad, type Measured, servedRate } from "./contenders.ts"
import { median } from "./figures.ts"
import type { Expected } from "./generated-queue.ts"
import type { Machine } from "./machine.ts"
import type { BenchOptions } from "./options.ts"
import { repo } from "./shell.ts"
import type { WatchLatency } from "./watch-latency.ts"

export interface Figures {
  readonly options: BenchOptions
  /** How the bench was invoked, as recorded in the results file. */
  readonly command: string
  readonly machine: Machine
  readonly expected: Expected
  readonly startup: { lagMs: number; replayMs: number } | undefined
  readonly watch: readonly WatchLatency[]
  readonly results: readonly Measured[]
}

/** Each contender's medians over its runs, in the order the contenders first ran. */
function summarize(results: readonly Measured[]) {
  const contenders = [...new Set(results.map((m) => m.contender))]
  const med = (c: string, f: (m: Measured) => number | undefined): number =>
    median(results.filter((m) => m.contender === c).map((m) => f(m) ?? Number.NaN))
  return Object.fromEntries(
    contenders.map((c) => [
      c,
      {
        messagesPerSecond: med(c, (m) => m.messagesPerSecond),
        seconds: med(c, (m) => m.seconds),
        peakRssMb: med(c, (m) => m.peakRssMb),
        cpuSeconds: med(c, (m) => m.cpuSeconds),
        cpuUsPerMessage: med(c, (m) => (m.cpuSeconds / m.seconds / m.messagesPerSecond) * 1e6),
        batchP50Ms: med(c, (m) => m.batchP50Ms),
        batchP99Ms: med(c, (m) => m.batchP99Ms),
        main: med(c, (m) => m.cpuSplit?.main),
        workers: med(c, (m) => m.cpuSplit?.workers),
        runtime: med(c, (m) => m.cpuSplit?.runtime),
        server: med(c, (m) => m.cpuSplit?.server),
        busy: med(c, (m) => m.cpuSplit?.busy),
        anonMb: med(c, (m) => m.cpuSplit?.anonMb),
        filesMb: med(c, (m) => m.cpuSplit?.filesMb),
      },
    ]),
  )
}

/** Writes the results file and prints the table. */
export function report(f: Figures): void {
  const { options, machine, expected, startup, watch, results } = f
  const { messages: N, runs, consumers } = options
  const summary = summarize(results)
  const rate = (c: string) => summary[c]?.messagesPerSecond ?? Number.NaN
  const ratios = {
    consumeOverFloor: rate("consume") / rate("floor"),
    consumeOverFloor2t: rate("consume") / rate("floor-2t"),
    floor2tOverFloor: rate("floor-2t") / rate("floor"),
    consumeOverRenames: rate("consume") / rate("renames"),
    floor2tOverRenames: rate("floor-2t") / rate("renames"),
    renames2tOverRenames: rate("renames-2t") / rate("renames"),
    consumeOverBaseline: rate("consume") / rate("baseline"),
    consumeOverBaselineWal: rate("consume") / rate("baseline-wal"),
    consumeOverOneThread: rate("consume") / rate("consume-1t"),
    consumeServedOverConsume: rate("consume-served") / rate("consume"),
    consumeAmqpOverRaw: rate("consume-amqp") / rate("amqp-raw"),
    consumeNatsOverRaw: rate("consume-nats") / rate("nats-raw"),
    consumeMqttOverRaw: rate("consume-mqtt") / rate("mqtt-raw"),
    consumeRedisOverRaw: rate("consume-redis") / rate("redis-raw"),
    consumePgOverConsume: rate("consume-pg") / rate("consume"),
    ...(consumers > 1 && { [`consumeX${consumers}OverConsume`]: rate(`consume-x${consumers}`) / rate("consume") }),
    ...(consumers > 1 && {
      [`consumePgX${consumers}OverConsumePg`]: rate(`consume-pg-x${consumers}`) / rate("consume-pg"),
    }),
  }

  const loadAtEnd = os.loadavg()[0] ?? 0
  const date = new Date().toISOString()
  fs.mkdirSync(join(repo, "bench/results"), { recursive: true })
  const file = join(repo, "bench/results", `${date.replaceAll(":", "-").slice(0, 19)}-${N}.json`)
  const record = {
    date,
    command: f.command,
    machine,
    loadAtEnd,
    expected,
    runs,
    cold: options.cold,
    summary,
    ratios,
    startup,
    watch,
    results,
  }
  fs.writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`)

  const cell = (x: number, d = 1) => (Number.isNaN(x) ? "-" : x.toFixed(d))
  const times = (x: number, d: number) => (Number.isNaN(x) ? "n/a" : `${x.toFixed(d)}x`)
  const lines = [
    `${N} messages (${expected.distinct} distinct, ${expected.duplicates} duplicates, ${expected.bad} bad)${options.cold ? ", read from the disk (--cold)" : ""}, medians of ${runs} runs, ${machine.nproc} cores (${machine.cpu}), ${machine.filesystem}, commit ${machine.commit}`,
    "",
    "| contender | messages/s | seconds | CPU s | CPU us/msg | batch p50 ms | batch p99 ms | peak RSS MB |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
    ...Object.entries(summary).map(
      ([c, s]) =>
        `| ${c} | ${cell(s.messagesPerSecond, 0)} | ${cell(s.seconds, 2)} | ${cell(s.cpuSeconds, 2)} | ${cell(s.cpuUsPerMessage, 1)} | ${cell(s.batchP50Ms)} | ${cell(s.batchP99Ms)} | ${cell(s.peakRssMb)} |`,
    ),
    "",
    "Where the CPU went (medians, seconds), and the largest process's resident memory by kind (MB; bench/cpu-split.ts):",
    "",
    "| contender | main threads | workers | runtime | PostgreSQL server | cores busy | anonymous MB | mapped files MB |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
    ...Object.entries(summary)
      .filter(([, s]) => !Number.isNaN(s.busy))
      .map(
        ([c, s]) =>
          `| ${c} | ${cell(s.main, 2)} | ${cell(s.workers, 2)} | ${cell(s.runtime, 2)} | ${cell(s.server, 2)} | ${cell(s.busy * 100, 0)}% | ${cell(s.anonMb)} | ${cell(s.filesMb)} |`,
      ),
    "",
    `consume / floor = ${times(ratios.consumeOverFloor, 2)}, consume / floor-2t = ${times(ratios.consumeOverFloor2t, 2)} (floor-2t / floor = ${times(ratios.floor2tOverFloor, 2)}), consume / baseline = ${times(ratios.consumeOverBaseline, 1)}, consume / baseline-wal = ${times(ratios.consumeOverBaselineWal, 1)}, consume / consume-1t = ${times(ratios.consumeOverOneThread, 2)}` +
      (consumers > 1
        ? `, ${consumers} consumers / 1 consumer = ${times(rate(`consume-x${consumers}`) / rate("consume"), 2)}`
        : ""),
    ...(summary.renames === undefined
      ? []
      : [
          `against the renames alone: consume / renames = ${times(ratios.consumeOverRenames, 2)}, floor-2t / renames = ${times(ratios.floor2tOverRenames, 2)}, renames-2t / renames = ${times(ratios.renames2tOverRenames, 2)} (what a second thread gains the renames)`,
        ]),
    ...(summary["consume-pg"] === undefined
      ? []
      : [
          `consume-pg / consume = ${times(ratios.consumePgOverConsume, 2)}` +
            (consumers > 1
              ? `, ${consumers} consumers / 1 consumer on PostgreSQL = ${times(rate(`consume-pg-x${consumers}`) / rate("consume-pg"), 2)}`
              : ""),
        ]),
    ...(["amqp", "nats", "redis", "mqtt"] as const)
      .filter((b) => summary[`consume-${b}`] !== undefined)
      .map(
        (b) =>
          `consume-${b} / ${b}-raw = ${times(rate(`consume-${b}`) / rate(`${b}-raw`), 2)} (spool from the broker over the client's own receive-and-ack loop)`,
      ),
    ...(summary["consume-served"] !== undefined
      ? [
          `consume-served / consume = ${times(ratios.consumeServedOverConsume, 3)}: serving slows consume by ${cell((1 - ratios.consumeServedOverConsume) * 100)}% (consume ${cell(rate("consume"), 0)} messages/s, consume-served ${cell(rate("consume-served"), 0)} while spool serve answered ${servedRate} requests/s)`,
          ...results.flatMap((m) =>
            m.served === undefined ? [] : [`consume-served run ${m.run}: ${describeLoad(m.served)}`],
          ),
        ]
      : []),
    ...watch.map(
      (w) =>
        `watch mode at ${cell(w.rate, 0)} messages/s for ${options.watchSeconds} s: arrival in inbox/ to done/ p50 ${cell(w.p50Ms)} ms, p99 ${cell(w.p99Ms)} ms, max ${cell(w.maxMs)} ms` +
        (w.fromCtime > 0 ? ` (${w.fromCtime} arrivals in done/ read from ctime: their inotify events were lost)` : ""),
    ),
    ...(startup
      ? [`start-up (median of 11): lag.sh ${cell(startup.lagMs, 0)} ms, replay.sh ${cell(startup.replayMs, 0)} ms`]
      : []),
    `load average (1 min): ${cell(machine.loadAtStart, 2)} at start, ${cell(loadAtEnd, 2)} at end`,
    ...Object.entries(machine.jscOptions).map(([k, v]) => `with ${k}=${v} for every contender`),
    `figures: ${file.slice(repo.length + 1)}`,
  ]
  process.stdout.write(`${lines.join("\n")}\n`)
}
