// Power cuts of a queue on the power-cut file system: consumers SIGKILLed at a random instant,
// then everything not durable thrown away, then a new boot; until the cuts are spent, then one
// run to the end. What each cut landed on, and the end state against one uninterrupted run's.
import { Database } from "bun:sqlite"
import fs from "node:fs"
import { join } from "node:path"
import { SQL } from "bun"
import { expectedAfterKills } from "./compare.ts"
import { consumeUntilDone, mtimes, startConsume, timeConsume } from "./consumers.ts"
import { endState, type Snapshot } from "./end-state.ts"
import { makeQueueFrom, rng } from "./generate.ts"
import { type KillObservation, observe } from "./kill-observations.ts"
import { type CutChange, type CutMode, type CutReport, mountPowerCut } from "./power-cut.ts"

/** What one power cut caught: the consumers' state as the kill left it, and what the cut threw away. */
export interface CutObservation {
  readonly mode: CutMode["kind"]
  /** Time from the consumers' spawn to the cut. */
  readonly delayMs: number
  /** Every consumer of the round had ended on its own before the cut. */
  readonly afterRun: boolean
  /** Changes the cut undid, counted by what they were (`inbox->processing`, `create ledger.db-wal`, ...). */
  readonly lost: Readonly<Record<string, number>>
  readonly kept: Readonly<Record<string, number>>
  /** Unsynced writes the cut undid, by file (the ledger's files by name, a queue file by its directory). */
  readonly writesLost: Readonly<Record<string, number>>
  /** What the killed consumers held in the ledger that survived the cut, read after the reboot. */
  readonly survivors: readonly KillObservation[]
  /**
   * Claims into processing/ the cut kept after undoing an earlier one. Their rows were not yet
   * durable (a claim's rows commit after its renames are fsynced), so each is an orphan the next
   * start takes before the files claimed ahead of it, now back where they came from: of two
   * deliveries of one msg_id, the later may come first.
   */
  readonly claimsOvertaken: number
  /** Files in processing/ after the cut with no claim row: a claim lost with its rename kept. */
  readonly orphans: number
  /** The reports as the cut left them (a cut after the run's end finds them written). */
  readonly reports: { readonly dupTxt: string | undefined; readonly errorCsv: string | undefined }
}

/** What a run under power cuts did. */
export interface CutRun {
  readonly cuts: CutObservation[]
  /** Consume processes started, the final one included. */
  readonly starts: number
}

function readOr(path: string): string | undefined {
  try {
    return fs.readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

/** The names of every claim row in a root's ledger (none when it has no ledger yet). */
async function claimNames(root: string, ledgerUrl: string | undefined): Promise<string[]> {
  if (ledgerUrl !== undefined) {
    const sql = new SQL({ url: ledgerUrl, max: 1 })
    try {
      return (await sql`SELECT name FROM claims`).map((r: { name: string }) => r.name)
    } catch {
      return [] // the cut can fall before the ledger's schema exists
    } finally {
      await sql.close()
    }
  }
  if (!fs.existsSync(join(root, "ledger.db"))) return []
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    return (db.query("SELECT name FROM claims").all() as { name: string }[]).map((r) => r.name)
  } catch {
    return []
  } finally {
    db.close()
  }
}

/** Where a change happened: the queue directory, or the file itself for one at the root (the ledger's). */
const placeOf = (path: string): string => (path.includes("/") ? (path.split("/")[0] as string) : path)

function changeKind(c: CutChange): string {
  return c.kind === "rename" ? `${placeOf(c.from)}->${placeOf(c.to ?? "")}` : `${c.kind} ${placeOf(c.from)}`
}

function tally(changes: readonly CutChange[]): Record<string, number> {
  const out: Record<string, number> = {}
  for (const c of changes) out[changeKind(c)] = (out[changeKind(c)] ?? 0) + 1
  return out
}

function claimsOvertaken(report: CutReport): number {
  let isEarlierLost = false
  let n = 0
  for (const c of report.journal) {
    if (c.kind !== "rename" || placeOf(c.to ?? "") !== "processing") continue
    if (c.isLost) isEarlierLost = true
    else if (isEarlierLost) n++
  }
  return n
}

function writesLost(report: CutReport): Record<string, number> {
  const out: Record<string, number> = {}
  // SQLite's -shm is never durable by design (it is rebuilt from the WAL after a crash): not worth a word.
  for (const d of report.data)
    if (d.lost > 0 && !d.path.endsWith("-shm")) out[placeOf(d.path)] = (out[placeOf(d.path)] ?? 0) + d.lost
  return out
}

/**
 * Runs rounds of `consumers` consume processes on the queue in `backing`, each round on a fresh
 * mount of the power-cut file system and a boot id of its own (SPOOL_BOOT_ID): the round is
 * SIGKILLed at a random instant (most from the moment it starts changing the queue, within
 * `activeMs`; one in five from the spawn, to land in start-up and recovery; after its end if it
 * ends first), the power cut (`modeOf(i)` for the i-th cut), the file system unmounted, until
 * `cuts` cuts or a cut that leaves inbox/ and processing/ empty. Then one more boot and a run
 * to the end, which must exit 0. Returns what each cut caught and the end
 * state as that run left it. `state` is a scratch directory on the same file system as `backing`.
 */
export async function consumeWithPowerCuts(
  backing: string,
  state: string,
  o: {
    readonly random: () => number
    readonly args: readonly string[]
    readonly consumers: number
    readonly cuts: number
    readonly activeMs: number
    readonly modeOf: (i: number) => CutMode["kind"]
    readonly ledgerUrl?: string
    readonly env?: Record<string, string>
    /** An application to run instead of the consume command (see startConsume). */
    readonly bin?: string
    /** "end": every cut waits for the round to end on its own, a power loss right after a run. */
    readonly cutAt?: "random" | "end"
  },
): Promise<CutRun & { readonly actual: Snapshot }> {
  const args = [...o.args, ...(o.ledgerUrl === undefined ? [] : ["--ledger", o.ledgerUrl])]
  const boot = (i: number) => ({ ...o.env, SPOOL_BOOT_ID: `power-cut-boot-${i}` })
  const cuts: CutObservation[] = []
  let starts = 0
  let startupMs = 500
  let killed: number[] = []
  // What the last cut's consumers held in the ledger, read after the reboot and before anyone
  // recovers it: the evidence a divergence leaves, and the attempts that make poison by design.
  const observeSurvivors = async (root: string) => {
    const last = cuts.at(-1)
    if (last === undefined) return
    const survivors = await Promise.all(killed.map((pid) => observe(root, last.delayMs, pid, o.ledgerUrl)))
    const claimed = new Set(await claimNames(root, o.ledgerUrl))
    const orphans = fs.readdirSync(join(root, "processing")).filter((n) => !claimed.has(n)).length
    cuts[cuts.length - 1] = { ...last, survivors, orphans }
  }
  for (let i = 0; i < o.cuts; i++) {
    await using mount = await mountPowerCut(backing, state)
    const root = mount.root
    await observeSurvivors(root)
    const fromSpawn = o.random() < 0.2
    const delayMs = Math.round(o.random() * (fromSpawn ? startupMs * 1.5 : o.activeMs))
    const mode: CutMode =
      o.modeOf(i) === "all" ? { kind: "all" } : { kind: "subset", seed: Math.floor(o.random() * 2 ** 32) }
    const before = mtimes(root)
    const spawnedAt = performance.now()
    const round = Array.from({ length: o.consumers }, () => startConsume(root, args, boot(i), o.bin))
    starts += round.length
    let exited = 0
    for (const c of round) void c.finished.then(() => exited++)
    const allExited = () => exited === round.length
    let activeAt: number | undefined
    if (!fromSpawn)
      for (const deadline = performance.now() + 60_000; performance.now() < deadline && !allExited(); ) {
        await Bun.sleep(10)
        if (mtimes(root) !== before) {
          activeAt = performance.now()
          break
        }
      }
    const cutAt = o.cutAt === "end" ? Number.POSITIVE_INFINITY : (activeAt ?? spawnedAt) + delayMs
    while (performance.now() < cutAt && !allExited())
      await Bun.sleep(Math.min(10, Math.max(0, cutAt - performance.now())))
    if (activeAt !== undefined) startupMs = activeAt - spawnedAt
    const afterRun = allExited()
    for (const c of round) c.proc.kill("SIGKILL")
    const ends = await Promise.all(round.map((c) => c.finished))
    const cutMs = Math.round(performance.now() - spawnedAt)
    for (const r of ends)
      if (r.signalCode !== "SIGKILL" && r.exitCode !== 0)
        throw new Error(`consume exited ${r.exitCode} before the cut:\n${r.stderr}`)
    const report = await mount.cut(mode)
    await mount.unmount()
    killed = round.map((c) => c.proc.pid)
    cuts.push({
      mode: mode.kind,
      delayMs: cutMs,
      afterRun,
      lost: tally(report.lost),
      kept: tally(report.kept),
      claimsOvertaken: claimsOvertaken(report),
      writesLost: writesLost(report),
      survivors: [],
      orphans: 0,
      reports: { dupTxt: readOr(join(backing, "dup.txt")), errorCsv: readOr(join(backing, "error.csv")) },
    })
    // Drained for good: further cuts would find nothing to interrupt.
    if (["inbox", "processing"].every((d) => fs.readdirSync(join(backing, d)).length === 0)) break
  }
  await using mount = await mountPowerCut(backing, state)
  await observeSurvivors(mount.root)
  starts++
  const r = await startConsume(mount.root, args, boot(o.cuts), o.bin).finished
  if (r.exitCode !== 0) throw new Error(`consume after the last cut exited ${r.exitCode ?? r.signalCode}:\n${r.stderr}`)
  const actual = await endState(mount.root, o.ledgerUrl)
  await mount.unmount()
  return { cuts, starts, actual }
}

/**
 * The power-cut check on the generated queue in `dir/src`: a copy consumed once, uninterrupted,
 * on a plain directory in `dir/reference`, and another on the power-cut file system in
 * `dir/cut` (backing directory `dir/cut/backing`) under `cuts` power cuts. Returns both end
 * states, the expected one accounting for poison by design as the kill storms do, and the run.
 */
export async function cutAgainstReference(o: {
  readonly dir: string
  readonly args: readonly string[]
  readonly seed: number
  readonly consumers: number
  readonly cuts: number
  readonly modeOf: (i: number) => CutMode["kind"]
  /** The cut window, from the time the uninterrupted run worked. */
  readonly activeMs: (referenceActiveMs: number) => number
  readonly ledgers: { readonly reference: string | undefined; readonly cut: string | undefined }
  readonly newLedger: () => Promise<{ readonly url: string | undefined } & AsyncDisposable>
  /** What runs, as consumeWithPowerCuts takes it; the reference and the reruns run it too. */
  readonly bin?: string
  readonly cutAt?: "random" | "end"
}) {
  const src = join(o.dir, "src")
  const withLedger = (url: string | undefined) => [...o.args, ...(url === undefined ? [] : ["--ledger", url])]
  makeQueueFrom(src, join(o.dir, "reference"))
  const backing = join(o.dir, "cut", "backing")
  makeQueueFrom(src, backing)
  const reference = await timeConsume(join(o.dir, "reference"), withLedger(o.ledgers.reference), o.bin)
  const activeMs = o.activeMs(reference.activeMs)
  const run = await consumeWithPowerCuts(backing, join(o.dir, "cut"), {
    random: rng(o.seed),
    args: o.args,
    consumers: o.consumers,
    cuts: o.cuts,
    activeMs,
    modeOf: o.modeOf,
    ...(o.ledgers.cut !== undefined && { ledgerUrl: o.ledgers.cut }),
    ...(o.bin !== undefined && { bin: o.bin }),
    ...(o.cutAt !== undefined && { cutAt: o.cutAt }),
  })
  const { expected, poisonedByKills } = await expectedAfterKills({
    reference: await endState(join(o.dir, "reference"), o.ledgers.reference),
    actual: run.actual,
    kills: run.cuts.flatMap((c) => c.survivors),
    rerun: async (env) => {
      await using crashLedger = await o.newLedger()
      const root = join(o.dir, "crash-on")
      makeQueueFrom(src, root)
      await consumeUntilDone(root, withLedger(crashLedger.url), env, o.bin)
      return await endState(root, crashLedger.url)
    },
  })
  return { expected, actual: run.actual, run, activeMs, poisonedByKills }
}

/** The cuts as lines a reader can follow: when each landed, what it threw away, what the consumers held after it. */
export function cutLog(cuts: readonly CutObservation[]): string[] {
  const counts = (r: Readonly<Record<string, number>>) =>
    Object.entries(r)
      .map(([k, n]) => `${n} ${k}`)
      .join(", ") || "nothing"
  return cuts.map((c, i) =>
    [
      `cut ${i + 1} (${c.mode}) at ${c.delayMs} ms${c.afterRun ? ", after the run ended" : ""}`,
      `lost: ${counts(c.lost)}`,
      Object.keys(c.kept).length > 0 ? `kept: ${counts(c.kept)}` : "",
      `writes lost: ${counts(c.writesLost)}`,
      c.orphans > 0 ? `${c.orphans} orphans in processing/` : "",
      c.claimsOvertaken > 0 ? `${c.claimsOvertaken} claims kept after an earlier one was lost` : "",
      c.survivors.some((k) => k.held.length > 0 || k.committedNotMoved > 0)
        ? `held after it: ${c.survivors.map((k) => `${k.claimed} claimed (${k.held.slice(0, 5).join(" ")}), ${k.committedNotMoved} committed not moved`).join("; ")}`
        : "",
    ]
      .filter((s) => s !== "")
      .join("; "),
  )
}

/** Sums cut observations into where they landed in the protocol. */
export function summarizeCuts(cuts: readonly CutObservation[]) {
  const has = (r: Readonly<Record<string, number>>, k: (key: string) => boolean) => Object.keys(r).some(k)
  return {
    cuts: cuts.length,
    afterRun: cuts.filter((c) => c.afterRun).length,
    /** A claim's rename into processing/ undone. */
    claimsUndone: cuts.filter((c) => has(c.lost, (k) => k.endsWith("->processing"))).length,
    /** A move out of processing/ undone. */
    movesUndone: cuts.filter((c) => has(c.lost, (k) => k.startsWith("processing->"))).length,
    /** Ledger writes (its WAL, its database) undone. */
    ledgerWritesLost: cuts.filter((c) => has(c.writesLost, (k) => k.startsWith("ledger.db"))).length,
    /** Files left in processing/ without a claim row, taken afresh as orphans. */
    orphansLeft: cuts.filter((c) => c.orphans > 0).length,
    /** Cuts that kept a claim and lost an earlier one: the order of claims changed (see claimsOvertaken). */
    reordered: cuts.filter((c) => c.claimsOvertaken > 0).length,
    /** Claims that survived the cut, committed or not, left for recovery. */
    claimsSurvived: cuts.filter((c) => c.survivors.some((k) => k.claimed + k.committedNotMoved > 0)).length,
    nothingLost: cuts.filter((c) => Object.keys(c.lost).length === 0 && Object.keys(c.writesLost).length === 0).length,
  }
}

/**
 * One consume on a power-cut mount of `backing` (`state`: the mount's scratch directory), run
 * until the fault `env.SPOOL_FAULT` names kills it; then the power is cut (every change not
 * durable is lost) and the mount is unmounted: what a crash and a power cut at that step leave
 * in `backing`. `during` runs beside the consumer (a producer, say), `beforeCut` after its death,
 * both with the mount's root. Throws, with the consumer's stderr, if it was not killed.
 */
export async function killedThenCut(o: {
  backing: string
  state: string
  args: readonly string[]
  env: Record<string, string>
  during?: (root: string) => Promise<void>
  beforeCut?: (root: string) => void
}): Promise<void> {
  await using mount = await mountPowerCut(o.backing, o.state)
  const consumer = startConsume(mount.root, o.args, o.env)
  await o.during?.(mount.root)
  const crashed = await consumer.finished
  if (crashed.signalCode !== "SIGKILL")
    throw new Error(`the consumer was not killed at ${o.env.SPOOL_FAULT} (exit ${crashed.exitCode}): ${crashed.stderr}`)
  o.beforeCut?.(mount.root)
  await mount.cut({ kind: "all" })
  await mount.unmount()
}
