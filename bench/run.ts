// `bun run bench [--messages N] [--runs R] [--million] [--consumers K] [--only LIST] [--watch-seconds S] [--keep]`
//
// Generates a queue of N messages (about 5% duplicates, 1% bad files) in a temp directory,
// then, for each run, gives each contender a fresh copy of that inbox and times it as a
// separate process: `consume` (durable, default batch size), the per-message-commit baselines
// (bench/baseline.ts with SQLite's default settings, and with WAL) and the raw floor in C
// (bench/floor.c). Every end state is checked.
// Prints a Markdown table of medians and writes all figures to bench/results/<date>-<N>.json.
import { Database } from "bun:sqlite"
import { spawnSync } from "node:child_process"
import fs from "node:fs"
import os from "node:os"
import { join, resolve } from "node:path"
import { parseArgs } from "node:util"
import { rng, tempDatabase } from "@spool/test-support"
import { SQL } from "bun"
import { brokerCommand, brokerContenders, brokerWith, isBrokerContender } from "./brokers.ts"

const repo = resolve(import.meta.dir, "..")
const { values: v } = parseArgs({
  options: {
    messages: { type: "string" },
    runs: { type: "string" },
    million: { type: "boolean" },
    consumers: { type: "string" },
    only: { type: "string" },
    keep: { type: "boolean" },
    "watch-seconds": { type: "string" },
    help: { type: "boolean", short: "h" },
  },
  strict: true,
})
if (v.help) {
  process.stdout.write(
    [
      "usage: bun run bench [--messages N] [--runs R] [--million] [--consumers K] [--only LIST] [--watch-seconds S] [--keep]",
      "  --messages N    queue size (default 100000)",
      "  --million       queue size 1000000",
      "  --runs R        runs per contender; the table shows medians (default 3)",
      "  --consumers K   also run K consume processes at once on one root (scaling)",
      "  --only LIST     comma-separated subset of consume,consume-1t,floor,baseline,baseline-wal,",
      "                  watch,consume-pg (default all but consume-pg). consume-1t is consume",
      "                  --one-thread (what the second thread gains); baseline keeps SQLite's default",
      "                  settings (rollback journal), baseline-wal is the same loop with WAL;",
      "                  consume-pg runs consume against a fresh PostgreSQL database on",
      "                  $SPOOL_TEST_PG_URL, default the local server (the two backends)",
      "                  consume-amqp, consume-nats: consume --source from a fresh RabbitMQ queue or",
      "                  JetStream stream of the same messages, each beside its raw client loop",
      "                  (amqp-raw, nats-raw: receive and ack only, the transport's floor); they",
      "                  need the brokers on 127.0.0.1 (5672 guest/guest, 4222 with -js)",
      "  --watch-seconds S  how long to feed consume --watch at 1000 messages/s (default 10)",
      "  --keep          keep the generated data (path printed)",
      "",
    ].join("\n"),
  )
  process.exit(0)
}

const N = v.million ? 1_000_000 : Number(v.messages ?? 100_000)
const runs = Number(v.runs ?? 3)
const consumers = Number(v.consumers ?? 1)
const watchSeconds = Number(v["watch-seconds"] ?? 10)
const only = new Set((v.only ?? "consume,consume-1t,floor,baseline,baseline-wal,watch").split(","))
// A broker's consume figure means something beside its transport's floor: one brings the other.
if (only.has("consume-amqp")) only.add("amqp-raw")
if (only.has("consume-nats")) only.add("nats-raw")
if (!Number.isInteger(N) || N < 1 || !Number.isInteger(runs) || runs < 1 || !Number.isInteger(consumers))
  throw new Error("--messages, --runs and --consumers take positive integers")

const sh = (cmd: string, args: string[]): string => {
  const r = spawnSync(cmd, args, { encoding: "utf8" })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed: ${r.stderr}`)
  return r.stdout
}

// ---- the floor binary ------------------------------------------------------------------

const floorBin = join(repo, "bench/out/floor")
function buildFloor(): void {
  const src = join(repo, "bench/floor.c")
  if (fs.existsSync(floorBin) && fs.statSync(floorBin).mtimeMs >= fs.statSync(src).mtimeMs) return
  if (!fs.existsSync("/usr/include/sqlite3.h"))
    throw new Error("bench/floor.c needs the SQLite header: apt-get install -y libsqlite3-dev")
  fs.mkdirSync(join(repo, "bench/out"), { recursive: true })
  sh("cc", ["-O2", "-o", floorBin, src, "-lsqlite3"])
}

// ---- data --------------------------------------------------------------------------------

function message(k: number): string {
  const cents = (k * 7919) % 1_000_000
  return JSON.stringify({
    msg_id: `m-${k.toString(36).padStart(7, "0")}`,
    order_no: `A-${Math.floor(k / 5)}`,
    seq: (k % 5) + 1,
    currency: "EUR",
    customer: `Customer ${k % 977}`,
    sent_at: "2026-11-02T08:07:00Z",
  }).replace(/}$/, `,"amount":${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, "0")}}`)
}

const badKinds = [
  '{"msg_id": "bad-parse", "order_no": "A-1", "seq": 1, "amo', // parse: truncated
  '{"msg_id": "bad-missing", "order_no": "A-1", "seq": 1}', // missing-field: no amount
  '{"msg_id": "bad-invalid", "order_no": "A-1", "seq": 1, "amount": "lots"}', // invalid-field
]

interface Expected {
  readonly messages: number
  readonly distinct: number
  readonly duplicates: number
  readonly distinctDuplicateIds: number
  readonly bad: number
}

function generate(inbox: string, n: number): Expected {
  const random = rng(20261129)
  let distinct = 0
  let duplicates = 0
  let bad = 0
  const dupIds = new Set<number>()
  for (let i = 0; i < n; i++) {
    const r = random()
    let body: string
    if (r < 0.01) body = badKinds[bad++ % badKinds.length] as string
    else if (r < 0.06 && distinct > 0) {
      const k = Math.floor(random() * distinct)
      dupIds.add(k)
      duplicates++
      body = message(k)
    } else body = message(distinct++)
    const name = `evt-${i.toString(36).padStart(7, "0")}-${Math.floor(random() * 0xffffffff).toString(16)}.json`
    fs.writeFileSync(join(inbox, name), body)
  }
  return { messages: n, distinct, duplicates, distinctDuplicateIds: dupIds.size, bad }
}

// ---- running ------------------------------------------------------------------------------

interface Measured {
  readonly contender: string
  readonly run: number
  readonly seconds: number
  readonly messagesPerSecond: number
  readonly peakRssMb: number
  readonly batchP50Ms?: number
  readonly batchP99Ms?: number
  readonly batches?: number
  /** The baselines' ledger settings, as SQLite reported them. */
  readonly sqlite?: { readonly journalMode: string; readonly synchronous: number }
}

const hasTime = fs.existsSync("/usr/bin/time")

function freshRoot(base: string, label: string, master: string): string {
  const root = join(base, label)
  fs.mkdirSync(root)
  for (const d of ["processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d))
  // Hard links: a fresh directory of the same files in a fraction of a copy's time; every
  // contender renames its own directory entries and reads the same page-cached data.
  sh("cp", ["-al", master, join(root, "inbox")])
  sh("sync", [])
  return root
}

/** Runs the processes at once; wall time until the last exits, peak RSS of the largest. */
async function timed(cmds: string[][]): Promise<{ seconds: number; peakRssMb: number; stdout: string[] }> {
  const timeFiles = cmds.map((_, i) => join(os.tmpdir(), `spool-bench-time-${process.pid}-${i}`))
  const started = performance.now()
  const procs = cmds.map((cmd, i) =>
    Bun.spawn(hasTime ? ["/usr/bin/time", "-f", "%M", "-o", timeFiles[i] as string, ...cmd] : cmd, {
      cwd: repo,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "inherit",
    }),
  )
  const hwm = procs.map(() => 0)
  const poll = hasTime
    ? undefined
    : setInterval(() => {
        for (const [i, p] of procs.entries()) {
          try {
            const m = /VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${p.pid}/status`, "utf8"))
            if (m) hwm[i] = Math.max(hwm[i] ?? 0, Number(m[1]))
          } catch {}
        }
      }, 5)
  const stdout = await Promise.all(procs.map((p) => new Response(p.stdout).text()))
  const codes = await Promise.all(procs.map((p) => p.exited))
  const seconds = (performance.now() - started) / 1000
  if (poll) clearInterval(poll)
  for (const [i, code] of codes.entries()) if (code !== 0) throw new Error(`${cmds[i]?.join(" ")} exited with ${code}`)
  const kb = hasTime ? timeFiles.map((f) => Number(fs.readFileSync(f, "utf8").trim().split("\n").pop())) : hwm
  for (const f of timeFiles) fs.rmSync(f, { force: true })
  return { seconds, peakRssMb: Math.max(...kb) / 1024, stdout }
}

function countEntries(dir: string): number {
  let n = 0
  const d = fs.opendirSync(dir, { bufferSize: 1024 })
  while (d.readSync() !== null) n++
  d.closeSync()
  return n
}

function rowCount(db: string): number {
  const d = new Database(db, { readonly: true })
  try {
    return (d.query("SELECT count(*) AS n FROM processed").get() as { n: number }).n
  } finally {
    d.close()
  }
}

/** Throws unless the queue ended exactly as the generated data says it must. */
function check(label: string, root: string, db: string | number, e: Expected, isConsume: boolean): void {
  const problems: string[] = []
  const expect = (what: string, got: number, want: number) => {
    if (got !== want) problems.push(`${what}: ${got}, expected ${want}`)
  }
  expect("inbox/", countEntries(join(root, "inbox")), 0)
  expect("processing/", countEntries(join(root, "processing")), 0)
  expect("done/", countEntries(join(root, "done")), e.distinct + e.duplicates)
  expect("error/", countEntries(join(root, "error")), e.bad)
  expect("processed rows", typeof db === "number" ? db : rowCount(db), e.distinct)
  if (isConsume) {
    const dup = fs.readFileSync(join(root, "dup.txt"), "utf8")
    expect("dup.txt lines", dup === "" ? 0 : dup.trimEnd().split("\n").length, e.distinctDuplicateIds)
    const csv = fs.readFileSync(join(root, "error.csv"), "utf8").trimEnd().split("\n")
    expect("error.csv rows", csv.length - 1, e.bad)
  }
  if (problems.length > 0) throw new Error(`${label}: wrong end state: ${problems.join("; ")}`)
}

const percentile = (xs: readonly number[], p: number): number => {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] as number
}
const median = (xs: readonly number[]): number => percentile(xs, 50)

/** One contender's figures from its timing and, when it reports them, its per-batch times. */
function measured(
  contender: string,
  run: number,
  t: { readonly seconds: number; readonly peakRssMb: number },
  batchMs?: readonly number[],
): Measured {
  const base = { contender, run, seconds: t.seconds, messagesPerSecond: N / t.seconds, peakRssMb: t.peakRssMb }
  if (batchMs === undefined) return base
  return {
    ...base,
    batchP50Ms: percentile(batchMs, 50),
    batchP99Ms: percentile(batchMs, 99),
    batches: batchMs.length,
  }
}

async function runOne(
  contender: string,
  run: number,
  base: string,
  master: string,
  e: Expected,
  processes = 1,
): Promise<Measured> {
  const label = `${contender}-${run}`
  const root = freshRoot(base, label, master)
  let m: Measured
  if (contender === "floor") {
    const db = join(root, "floor.db")
    const t = await timed([[floorBin, root, db]])
    const out = JSON.parse(t.stdout[0] as string) as { batchMs: number[] }
    check(label, root, db, e, false)
    m = measured(contender, run, t, out.batchMs)
  } else if (contender === "baseline" || contender === "baseline-wal") {
    const db = join(root, "baseline.db")
    const wal = contender === "baseline-wal" ? ["--wal"] : []
    const t = await timed([["bun", "bench/baseline.ts", ...wal, root, db]])
    const out = JSON.parse(t.stdout[0] as string) as { journalMode: string; synchronous: number }
    check(label, root, db, e, false)
    m = { ...measured(contender, run, t), sqlite: { journalMode: out.journalMode, synchronous: out.synchronous } }
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
      m = measured(contender, run, t, (JSON.parse(fs.readFileSync(stats, "utf8")) as { batchMs: number[] }).batchMs)
    } else {
      const { acked } = JSON.parse(t.stdout[0] as string) as { acked: number }
      if (acked !== e.messages) throw new Error(`${label}: acked ${acked}, expected ${e.messages}`)
      m = measured(contender, run, t)
    }
  } else {
    // consume-pg: the same command against a fresh PostgreSQL database (the backend comparison),
    // dropped even when the run fails.
    await using pg = contender === "consume-pg" ? await tempDatabase() : undefined
    // consume-1t: the same command with --one-thread, to show what the second thread gains.
    const extraArgs = pg ? ["--ledger", pg.url] : contender === "consume-1t" ? ["--one-thread"] : []
    const stats = Array.from({ length: processes }, (_, i) => join(base, `${label}.stats-${i}.json`))
    const t = await timed(
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
    )
    const batchMs = stats.flatMap((s) => (JSON.parse(fs.readFileSync(s, "utf8")) as { batchMs: number[] }).batchMs)
    if (pg) {
      const sql = new SQL({ url: pg.url, max: 1 })
      const [row] = (await sql`SELECT count(*)::int AS n FROM processed`) as { n: number }[]
      await sql.close()
      check(label, root, row?.n ?? -1, e, true)
    } else check(label, root, join(root, "ledger.db"), e, true)
    m = measured(contender, run, t, batchMs)
  }
  fs.rmSync(root, { recursive: true, force: true })
  const lat = m.batchP50Ms === undefined ? "" : ` batch p50 ${fmt(m.batchP50Ms)} ms p99 ${fmt(m.batchP99Ms ?? 0)} ms`
  process.stderr.write(
    `bench: ${label}: ${fmt(m.seconds, 2)} s, ${Math.round(m.messagesPerSecond)} msg/s, peak RSS ${fmt(m.peakRssMb)} MB${lat}\n`,
  )
  return m
}

const fmt = (x: number, digits = 1): string => x.toFixed(digits)

// ---- main ---------------------------------------------------------------------------------

buildFloor()
/** The checked-out commit, with "-dirty" for uncommitted changes; "unknown" outside a git checkout. */
function commitMeasured(): string {
  try {
    const head = sh("git", ["-C", repo, "rev-parse", "--short", "HEAD"]).trim()
    const isDirty = sh("git", ["-C", repo, "status", "--porcelain", "--untracked-files=no"]).trim() !== ""
    return `${head}${isDirty ? "-dirty" : ""}`
  } catch {
    return "unknown"
  }
}

const base = fs.mkdtempSync(join(os.tmpdir(), "spool-bench-"))
const master = join(base, "master-inbox")
fs.mkdirSync(master)
const fsLine = sh("df", ["-T", base]).trim().split("\n").pop()?.split(/\s+/) ?? []
const machine = {
  nproc: os.availableParallelism(),
  cpu: os.cpus()[0]?.model ?? "unknown",
  memoryMb: Math.round(os.totalmem() / 2 ** 20),
  filesystem: `${fsLine[1]} on ${fsLine[0]} (${fsLine[6]})`,
  kernel: os.release(),
  /** The code measured: the commit, marked dirty when the work tree had uncommitted changes. */
  commit: commitMeasured(),
  /** 1-minute load average when the bench started: other work on the machine skews every figure. */
  loadAtStart: os.loadavg()[0] ?? 0,
  bun: Bun.version,
  // The floor links the system SQLite; bun:sqlite embeds its own.
  sqliteFloor: sh("sqlite3", ["--version"]).split(" ")[0],
  sqliteBun: (new Database(":memory:").query("SELECT sqlite_version() AS v").get() as { v: string }).v,
  /** JavaScriptCore settings passed down to every contender (BUN_JSC_*), when any is set. */
  jscOptions: Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("BUN_JSC_"))),
}
process.stderr.write(`bench: ${N} messages in ${base} (${machine.filesystem}); generating...\n`)
const t0 = performance.now()
const expected = generate(master, N)
sh("sync", [])
process.stderr.write(
  `bench: generated in ${fmt((performance.now() - t0) / 1000)} s: ${expected.distinct} distinct, ${expected.duplicates} duplicates, ${expected.bad} bad\n`,
)

/** Start-up of the cron-run ops commands: median wall time of 11 runs, in ms (undefined if not built). */
function measureStartup(base: string): { lagMs: number; replayMs: number } | undefined {
  const dist = join(repo, "packages/ops/dist")
  if (!fs.existsSync(join(dist, "lag.sh")) || !fs.existsSync(join(dist, "replay.sh"))) {
    process.stderr.write("bench: packages/ops/dist not built (bun run build); skipping lag.sh/replay.sh start-up\n")
    return undefined
  }
  const root = join(base, "startup")
  for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
  const time = (cmd: string[], wantCode: number): number => {
    const xs: number[] = []
    for (let i = 0; i < 11; i++) {
      const t = performance.now()
      const r = spawnSync(cmd[0] as string, cmd.slice(1), { env: { ...process.env, SPOOL_ROOT: root } })
      xs.push(performance.now() - t)
      if (r.status !== wantCode) throw new Error(`${cmd.join(" ")} exited ${r.status}: ${r.stderr}`)
    }
    return median(xs)
  }
  // lag on an empty queue answers 0; replay of a file not in error/ refuses (1) after the same start-up.
  return {
    lagMs: time([join(dist, "lag.sh"), root, "0"], 0),
    replayMs: time([join(dist, "replay.sh"), "absent.json"], 1),
  }
}

/**
 * Watch-mode latency: `consume --watch` (durable, defaults) runs while this process puts
 * `rate` messages per second into inbox/ for `seconds`, the Maildir way (tmp/, then rename).
 * A file's latency is from its rename into inbox/ to its rename into done/ (the inode's ctime,
 * which rename(2) sets). Percentiles over every file; the end state is checked as elsewhere.
 */
async function measureWatch(base: string, seconds: number, rate: number) {
  const root = join(base, "watch")
  for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
  const proc = Bun.spawn(["bun", "packages/consumer/bin/consume.ts", "--root", root, "--watch", "--quiet"], {
    cwd: repo,
    stdin: "ignore",
    stdout: "ignore",
    stderr: "inherit",
  })
  // Start timing once the consumer is up: one file through end to end first.
  fs.writeFileSync(join(root, "tmp", "warm-up.json"), message(9_999_999))
  fs.renameSync(join(root, "tmp", "warm-up.json"), join(root, "inbox", "warm-up.json"))
  const upBy = performance.now() + 60_000
  while (!fs.existsSync(join(root, "done", "warm-up.json")) && performance.now() < upBy) await Bun.sleep(10)
  const arrivals = new Map<string, number>()
  const total = seconds * rate
  const started = performance.now()
  // Paced in 10 ms slices: at each slice, every message due by then is put in.
  for (let i = 0; i < total; ) {
    const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * rate) + 1)
    for (; i < due; i++) {
      const name = `w-${i.toString(36).padStart(6, "0")}.json`
      fs.writeFileSync(join(root, "tmp", name), message(10_000_000 + i))
      fs.renameSync(join(root, "tmp", name), join(root, "inbox", name))
      arrivals.set(name, performance.timeOrigin + performance.now())
    }
    await Bun.sleep(10)
  }
  const producedIn = (performance.now() - started) / 1000
  const deadline = performance.now() + 60_000
  while (countEntries(join(root, "done")) < total + 1 && performance.now() < deadline) await Bun.sleep(50)
  proc.kill("SIGTERM")
  await proc.exited
  const latencies: number[] = []
  for (const [name, at] of arrivals) latencies.push(fs.lstatSync(join(root, "done", name)).ctimeMs - at)
  expectDone(root, total + 1)
  return {
    messages: total,
    rate: total / producedIn,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    maxMs: Math.max(...latencies),
  }
}

function expectDone(root: string, n: number): void {
  const got = [
    countEntries(join(root, "done")),
    countEntries(join(root, "inbox")),
    countEntries(join(root, "processing")),
  ]
  if (got[0] !== n || got[1] !== 0 || got[2] !== 0)
    throw new Error(`watch: wrong end state: done/ ${got[0]} (want ${n}), inbox/ ${got[1]}, processing/ ${got[2]}`)
}

const startup = measureStartup(base)
const results: Measured[] = []
let watchResult: Awaited<ReturnType<typeof measureWatch>> | undefined
try {
  for (let r = 1; r <= runs; r++) {
    for (const c of ["consume", "consume-1t", "floor", "baseline", "baseline-wal", "consume-pg", ...brokerContenders])
      if (only.has(c)) results.push(await runOne(c, r, base, master, expected))
    if (consumers > 1) results.push(await runOne(`consume-x${consumers}`, r, base, master, expected, consumers))
  }
  if (only.has("watch") && watchSeconds > 0) {
    watchResult = await measureWatch(base, watchSeconds, 1000)
    process.stderr.write(
      `bench: watch: ${watchResult.messages} messages at ${fmt(watchResult.rate, 0)}/s, arrival to done/ p50 ${fmt(watchResult.p50Ms)} ms p99 ${fmt(watchResult.p99Ms)} ms\n`,
    )
  }
} finally {
  if (!v.keep) fs.rmSync(base, { recursive: true, force: true })
  else process.stderr.write(`bench: data kept in ${base}\n`)
}

const contenders = [...new Set(results.map((m) => m.contender))]
const med = (c: string, f: (m: Measured) => number | undefined): number =>
  median(results.filter((m) => m.contender === c).map((m) => f(m) ?? Number.NaN))
const summary = Object.fromEntries(
  contenders.map((c) => [
    c,
    {
      messagesPerSecond: med(c, (m) => m.messagesPerSecond),
      seconds: med(c, (m) => m.seconds),
      peakRssMb: med(c, (m) => m.peakRssMb),
      batchP50Ms: med(c, (m) => m.batchP50Ms),
      batchP99Ms: med(c, (m) => m.batchP99Ms),
    },
  ]),
)
const rate = (c: string) => summary[c]?.messagesPerSecond ?? Number.NaN
const ratios = {
  consumeOverFloor: rate("consume") / rate("floor"),
  consumeOverBaseline: rate("consume") / rate("baseline"),
  consumeOverBaselineWal: rate("consume") / rate("baseline-wal"),
  consumeOverOneThread: rate("consume") / rate("consume-1t"),
  consumeAmqpOverRaw: rate("consume-amqp") / rate("amqp-raw"),
  consumeNatsOverRaw: rate("consume-nats") / rate("nats-raw"),
  ...(consumers > 1 && { [`consumeX${consumers}OverConsume`]: rate(`consume-x${consumers}`) / rate("consume") }),
}

const loadAtEnd = os.loadavg()[0] ?? 0
const date = new Date().toISOString()
fs.mkdirSync(join(repo, "bench/results"), { recursive: true })
const file = join(repo, "bench/results", `${date.replaceAll(":", "-").slice(0, 19)}-${N}.json`)
fs.writeFileSync(
  file,
  `${JSON.stringify({ date, command: `bun run bench ${process.argv.slice(2).join(" ")}`.trim(), machine, loadAtEnd, expected, runs, summary, ratios, startup, watch: watchResult, results }, null, 2)}\n`,
)

const cell = (x: number, d = 1) => (Number.isNaN(x) ? "-" : x.toFixed(d))
const times = (x: number, d: number) => (Number.isNaN(x) ? "n/a" : `${x.toFixed(d)}x`)
const lines = [
  `${N} messages (${expected.distinct} distinct, ${expected.duplicates} duplicates, ${expected.bad} bad), medians of ${runs} runs, ${machine.nproc} cores (${machine.cpu}), ${machine.filesystem}, commit ${machine.commit}`,
  "",
  "| contender | messages/s | seconds | batch p50 ms | batch p99 ms | peak RSS MB |",
  "|---|---:|---:|---:|---:|---:|",
  ...contenders.map((c) => {
    const s = summary[c]
    if (!s) return ""
    return `| ${c} | ${cell(s.messagesPerSecond, 0)} | ${cell(s.seconds, 2)} | ${cell(s.batchP50Ms)} | ${cell(s.batchP99Ms)} | ${cell(s.peakRssMb)} |`
  }),
  "",
  `consume / floor = ${times(ratios.consumeOverFloor, 2)}, consume / baseline = ${times(ratios.consumeOverBaseline, 1)}, consume / baseline-wal = ${times(ratios.consumeOverBaselineWal, 1)}, consume / consume-1t = ${times(ratios.consumeOverOneThread, 2)}` +
    (consumers > 1
      ? `, ${consumers} consumers / 1 consumer = ${times(rate(`consume-x${consumers}`) / rate("consume"), 2)}`
      : ""),
  ...(["amqp", "nats"] as const)
    .filter((b) => summary[`consume-${b}`] !== undefined)
    .map(
      (b) =>
        `consume-${b} / ${b}-raw = ${times(b === "amqp" ? ratios.consumeAmqpOverRaw : ratios.consumeNatsOverRaw, 2)} (spool from the broker over the client's own receive-and-ack loop)`,
    ),
  ...(watchResult
    ? [
        `watch mode at ${cell(watchResult.rate, 0)} messages/s for ${watchSeconds} s: arrival in inbox/ to done/ p50 ${cell(watchResult.p50Ms)} ms, p99 ${cell(watchResult.p99Ms)} ms, max ${cell(watchResult.maxMs)} ms`,
      ]
    : []),
  ...(startup
    ? [`start-up (median of 11): lag.sh ${cell(startup.lagMs, 0)} ms, replay.sh ${cell(startup.replayMs, 0)} ms`]
    : []),
  `load average (1 min): ${cell(machine.loadAtStart, 2)} at start, ${cell(loadAtEnd, 2)} at end`,
  ...Object.entries(machine.jscOptions).map(([k, v]) => `with ${k}=${v} for every contender`),
  `figures: ${file.slice(repo.length + 1)}`,
]
process.stdout.write(`${lines.join("\n")}\n`)
