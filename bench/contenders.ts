// The contenders, each timed on a fresh copy of the generated inbox and its end state checked:
// consume (and consume-1t, consume-pg, consume-xK), the per-message-commit baselines
// (baseline.ts), the raw floor in C (floor.c) and the broker contenders (brokers.ts).
import fs from "node:fs"
import { join } from "node:path"
import { tempDatabase } from "@spool/test-support"
import { SQL } from "bun"
import { brokerCommand, brokerWith, isBrokerContender } from "./brokers.ts"
import { check } from "./end-state.ts"
import { fmt, percentile } from "./figures.ts"
import { type Expected, freshRoot } from "./generated-queue.ts"
import { repo, sh } from "./shell.ts"
import { timed } from "./timing.ts"

/** One run of one contender. */
export interface Measured {
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

const floorBin = join(repo, "bench/out/floor")

/** Compiles bench/floor.c unless its binary is newer than the source. */
export function buildFloor(): void {
  const src = join(repo, "bench/floor.c")
  if (fs.existsSync(floorBin) && fs.statSync(floorBin).mtimeMs >= fs.statSync(src).mtimeMs) return
  if (!fs.existsSync("/usr/include/sqlite3.h"))
    throw new Error("bench/floor.c needs the SQLite header: apt-get install -y libsqlite3-dev")
  fs.mkdirSync(join(repo, "bench/out"), { recursive: true })
  sh("cc", ["-O2", "-o", floorBin, src, "-lsqlite3"])
}

/** One contender's figures from its timing and, when it reports them, its per-batch times. */
function measured(
  contender: string,
  run: number,
  messages: number,
  t: { readonly seconds: number; readonly peakRssMb: number },
  batchMs?: readonly number[],
): Measured {
  const base = { contender, run, seconds: t.seconds, messagesPerSecond: messages / t.seconds, peakRssMb: t.peakRssMb }
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
): Promise<Measured> {
  const label = `${contender}-${run}`
  const root = freshRoot(base, label, master)
  let m: Measured
  if (contender === "floor") {
    const db = join(root, "floor.db")
    const t = await timed([[floorBin, root, db]])
    const out = JSON.parse(t.stdout[0] as string) as { batchMs: number[] }
    check(label, root, db, e, false)
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
    m = measured(contender, run, e.messages, t, batchMs)
  }
  fs.rmSync(root, { recursive: true, force: true })
  const lat = m.batchP50Ms === undefined ? "" : ` batch p50 ${fmt(m.batchP50Ms)} ms p99 ${fmt(m.batchP99Ms ?? 0)} ms`
  process.stderr.write(
    `bench: ${label}: ${fmt(m.seconds, 2)} s, ${Math.round(m.messagesPerSecond)} msg/s, peak RSS ${fmt(m.peakRssMb)} MB${lat}\n`,
  )
  return m
}
