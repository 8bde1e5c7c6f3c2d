// The contenders, each timed on a fresh copy of the generated inbox and its end state checked:
// consume (and consume-1t, consume-pg, consume-xK), the per-message-commit baselines
// (baseline.ts), the raw floors in C (floor.c, floor-2t.c), the renames alone (renames.c), the
// broker contenders (brokers.ts), and consume-served: consume while `spool serve` on the same
// root answers a load (served.ts).
import fs from "node:fs"
import { join } from "node:path"
import { tempDatabase } from "@spool/test-support"
import { SQL } from "bun"
import { brokerCommand, brokerWith, isBrokerContender } from "./brokers.ts"
import type { CpuSplit } from "./cpu-split.ts"
import { check, renamedAll } from "./end-state.ts"
import { fmt, percentile } from "./figures.ts"
import { type Expected, freshRoot } from "./generated-queue.ts"
import { type ServedLoad, whileServing } from "./served.ts"
import { repo, sh } from "./shell.ts"
import { timed } from "./timing.ts"

/** The requests a second the consume-served contender's console is asked. */
export const servedRate = 50

/** One run of one contender. */
export interface Measured {
  readonly contender: string
  readonly run: number
  readonly seconds: number
  readonly messagesPerSecond: number
  readonly peakRssMb: number
  /** CPU time (user + system) of the contender's processes. */
  readonly cpuSeconds: number
  readonly batchP50Ms?: number
  readonly batchP99Ms?: number
  readonly batches?: number
  /** The baselines' ledger settings, as SQLite reported them. */
  readonly sqlite?: { readonly journalMode: string; readonly synchronous: number }
  /** consume-served: what the console answered while consume drained. */
  readonly served?: ServedLoad
  /** Where the CPU went: the contender's threads by kind, the PostgreSQL server's, the cores' busy share. */
  readonly cpuSplit?: CpuSplit
}

/** The C programs: each source, the headers it includes, and the libraries it links. */
const programs: Record<"floor" | "floor-2t" | "renames", { headers: readonly string[]; libs: readonly string[] }> = {
  floor: { headers: ["floor.h", "queue-dirs.h"], libs: ["-lsqlite3"] },
  "floor-2t": { headers: ["floor.h", "queue-dirs.h"], libs: ["-lsqlite3"] },
  renames: { headers: ["queue-dirs.h"], libs: [] },
}
const binary = (program: keyof typeof programs) => join(repo, "bench/out", program)

/**
 * The C contenders and how each runs: the floors on one thread (floor.c) and pipelined over two
 * (floor-2t.c), and each message's two renames alone on one thread and split over two (renames.c).
 */
const cContenders: Record<string, (root: string, db: string) => string[]> = {
  floor: (root, db) => [binary("floor"), root, db],
  "floor-2t": (root, db) => [binary("floor-2t"), root, db],
  renames: (root) => [binary("renames"), root, "1"],
  "renames-2t": (root) => [binary("renames"), root, "2"],
}
const isC = (c: string) => c in cContenders
const isRenames = (c: string) => c.startsWith("renames")

/** Compiles each C program in bench/ unless its binary is newer than its source and headers. */
export function buildFloor(): void {
  for (const [name, { headers, libs }] of Object.entries(programs)) {
    const src = join(repo, `bench/${name}.c`)
    const bin = binary(name as keyof typeof programs)
    const newest = Math.max(...[src, ...headers.map((h) => join(repo, "bench", h))].map((f) => fs.statSync(f).mtimeMs))
    if (fs.existsSync(bin) && fs.statSync(bin).mtimeMs >= newest) continue
    if (libs.includes("-lsqlite3") && !fs.existsSync("/usr/include/sqlite3.h"))
      throw new Error(`bench/${name}.c needs the SQLite header: apt-get install -y libsqlite3-dev`)
    fs.mkdirSync(join(repo, "bench/out"), { recursive: true })
    sh("cc", ["-O2", "-pthread", "-o", bin, src, ...libs])
  }
}

/** One contender's figures from its timing and, when it reports them, its per-batch times. */
function measured(
  contender: string,
  run: number,
  messages: number,
  t: {
    readonly seconds: number
    readonly peakRssMb: number
    readonly cpuSeconds: number
    readonly cpuSplit?: CpuSplit
  },
  batchMs?: readonly number[],
): Measured {
  const base = {
    contender,
    run,
    seconds: t.seconds,
    messagesPerSecond: messages / t.seconds,
    peakRssMb: t.peakRssMb,
    cpuSeconds: t.cpuSeconds,
    ...(t.cpuSplit && { cpuSplit: t.cpuSplit }),
  }
  if (batchMs === undefined) return base
  return {
    ...base,
    batchP50Ms: percentile(batchMs, 50),
    batchP99Ms: percentile(batchMs, 99),
    batches: batchMs.length,
  }
}

/** Times `contender` (with `processes` consume processes at once) on a fresh copy of `master`. */
export async function runOne(
  contender: string,
  run: number,
  base: string,
  master: string,
  e: Expected,
  processes = 1,
  cold = false,
): Promise<Measured> {
  const label = `${contender}-${run}`
  const root = freshRoot(base, label, master, cold)
  let m: Measured
  if (isC(contender)) {
    const db = join(root, "floor.db")
    const t = await timed([cContenders[contender]?.(root, db) ?? []])
    const out = JSON.parse(t.stdout[0] as string) as { batchMs: number[] }
    if (isRenames(contender)) renamedAll(label, root, e)
    else check(label, root, db, e, false)
    m = measured(contender, run, e.messages, t, out.batchMs)
  } else if (contender === "baseline" || contender === "baseline-wal") {
    const db = join(root, "baseline.db")
    const wal = contender === "baseline-wal" ? ["--wal"] : []
    const t = await timed([["bun", "bench/baseline.ts", ...wal, root, db]])
    const out = JSON.parse(t.stdout[0] as string) as { journalMode: string; synchronous: number }
    check(label, root, db, e, false)
    m = {
      ...measured(contender, run, e.messages, t),
      sqlite: { journalMode: out.journalMode, synchronous: out.synchronous },
    }
  } else if (isBrokerContender(contender)) {
    // The messages wait in the broker, not in inbox/; publishing them is not timed.
    fs.rmSync(join(root, "inbox"), { recursive: true })
    fs.mkdirSync(join(root, "inbox"))
    await using broker = await brokerWith(contender, master)
    const stats = join(base, `${label}.stats.json`)
    const t = await timed([brokerCommand(contender, broker.url, root, stats)])
    const unacked = await broker.unacked()
    if (unacked !== 0) throw new Error(`${label}: ${unacked} messages left unacknowledged`)
    if (contender.startsWith("consume-")) {
      check(label, root, join(root, "ledger.db"), e, true)
      const { batchMs } = JSON.parse(fs.readFileSync(stats, "utf8")) as { batchMs: number[] }
      m = measured(contender, run, e.messages, t, batchMs)
    } else {
      const { acked } = JSON.parse(t.stdout[0] as string) as { acked: number }
      if (acked !== e.messages) throw new Error(`${label}: acked ${acked}, expected ${e.messages}`)
      m = measured(contender, run, e.messages, t)
    }
  } else {
    // consume-pg (and consume-pg-xK): the same command against a fresh PostgreSQL database (the
    // backend comparison), dropped even when the run fails.
    await using pg = contender.startsWith("consume-pg") ? await tempDatabase() : undefined
    // consume-1t: the same command with --one-thread, to show what the second thread gains.
    const extraArgs = pg ? ["--ledger", pg.url] : contender === "consume-1t" ? ["--one-thread"] : []
    const stats = Array.from({ length: processes }, (_, i) => join(base, `${label}.stats-${i}.json`))
    const drain = () =>
      timed(
        stats.map((s) => [
          "bun",
          "packages/consumer/bin/consume.ts",
          "--root",
          root,
          ...extraArgs,
          "--quiet",
          "--stats-json",
          s,
        ]),
        pg !== undefined,
      )
    // consume-served: the same command while the console on the same root answers servedRate requests a second.
    const { result: t, load } =
      contender === "consume-served"
        ? await whileServing(root, servedRate, drain)
        : { result: await drain(), load: undefined }
    const batchMs = stats.flatMap((s) => (JSON.parse(fs.readFileSync(s, "utf8")) as { batchMs: number[] }).batchMs)
    if (pg) {
      const sql = new SQL({ url: pg.url, max: 1 })
      const [row] = (await sql`SELECT count(*)::int AS n FROM processed`) as { n: number }[]
      await sql.close()
      check(label, root, row?.n ?? -1, e, true)
    } else check(label, root, join(root, "ledger.db"), e, true)
    m = { ...measured(contender, run, e.messages, t, batchMs), ...(load !== undefined && { served: load }) }
  }
  fs.rmSync(root, { recursive: true, force: true })
  const lat = m.batchP50Ms === undefined ? "" : ` batch p50 ${fmt(m.batchP50Ms)} ms p99 ${fmt(m.batchP99Ms ?? 0)} ms`
  process.stderr.write(
    `bench: ${label}: ${fmt(m.seconds, 2)} s, ${Math.round(m.messagesPerSecond)} msg/s, CPU ${fmt(m.cpuSeconds, 2)} s, peak RSS ${fmt(m.peakRssMb)} MB${lat}\n`,
  )
  if (m.served !== undefined) process.stderr.write(`bench: ${label}: ${describeLoad(m.served)}\n`)
  if (m.cpuSplit !== undefined) process.stderr.write(`bench: ${label}: ${describeSplit(m.cpuSplit)}\n`)
  return m
}

/** One line of where a run's CPU went. */
export function describeSplit(s: CpuSplit): string {
  const server = s.server === undefined ? "" : `, PostgreSQL server ${fmt(s.server, 2)} s`
  return (
    `CPU s by thread: main ${fmt(s.main, 2)}, workers ${fmt(s.workers, 2)}, runtime ${fmt(s.runtime, 2)}${server}; cores busy ${fmt(s.busy * 100, 0)}%; ` +
    `resident at most ${fmt(s.anonMb)} MB anonymous, ${fmt(s.filesMb)} MB of mapped files`
  )
}

/** One line of what the console answered during a drain. */
export function describeLoad(l: ServedLoad): string {
  const statuses = Object.entries(l.non200).map(([status, n]) => `${n} answered ${status}`)
  const errors = l.failed === 0 ? [] : [`${l.failed} unanswered`]
  const short = l.seconds < 10 ? " (the drain was shorter than 10 s: served for all of it)" : ""
  return (
    `console asked ${l.requests} requests in ${fmt(l.seconds, 2)} s (${fmt(l.rate, 1)}/s)${short}, ${l.answered} answered, ` +
    `latency p50 ${fmt(l.p50Ms)} ms p99 ${fmt(l.p99Ms)} ms max ${fmt(l.maxMs)} ms; ` +
    `CPU: console ${fmt(l.consoleCpuSeconds, 2)} s, load generator ${fmt(l.generatorCpuSeconds, 2)} s; ` +
    ([...statuses, ...errors].join(", ") || "every answer 200")
  )
}
