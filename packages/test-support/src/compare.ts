// The end state a run under random kills must reach, and every difference from it, named.
import { join } from "node:path"
import { consumeUntilDone, timeConsume } from "./consumers.ts"
import { endState, type Snapshot } from "./end-state.ts"
import { makeQueueFrom, rng } from "./generate.ts"
import { type KillObservation, poisonedByKills } from "./kill-observations.ts"
import { consumeWithRandomKills } from "./kills.ts"

/**
 * The end state a run under random kills must reach. That is the uninterrupted `reference`'s,
 * unless the kills made files poison by design (see poisonedByKills): then it is the state of
 * an uninterrupted run in which those files crash the consumer whenever they are judged
 * (SPOOL_CRASH_ON), which is what poison stands for; `rerun` makes that run on a fresh copy of
 * the queue. A poison file the kills do not account for is left for the comparison to report.
 */
export async function expectedAfterKills(o: {
  readonly reference: Snapshot
  readonly actual: Snapshot
  readonly kills: readonly KillObservation[]
  readonly maxAttempts?: number
  readonly rerun: (env: Record<string, string>) => Promise<Snapshot>
}): Promise<{ expected: Snapshot; poisonedByKills: string[] }> {
  const poisoned = (o.actual.failures as { original: string; reason: string }[])
    .filter((f) => f.reason === "poison")
    .map((f) => f.original)
  const byKills = poisonedByKills(o.kills, o.maxAttempts)
  // A kill soon after a restart often lands in the retry of a crashed batch, one file at a
  // time, so two files poisoned by design in one run are not rare: the rerun crashes on each.
  if (poisoned.length === 0 || !poisoned.every((name) => byKills.includes(name)))
    return { expected: o.reference, poisonedByKills: [] }
  return { expected: await o.rerun({ SPOOL_CRASH_ON: poisoned.join("/") }), poisonedByKills: poisoned }
}

/**
 * The random-kill check on the generated queue in `dir/src`: a copy consumed once,
 * uninterrupted, in `dir/reference`, and another under rounds of `consumers` SIGKILLed at
 * random in `dir/killed`, each on its own ledger (`ledgers`: undefined for SQLite in the root,
 * or a PostgreSQL URL). Returns both end states, the expected one accounting for poison by
 * design (see expectedAfterKills, whose rerun gets a ledger from `newLedger`), and the run.
 */
export async function killedAgainstReference(o: {
  readonly dir: string
  readonly args: readonly string[]
  readonly seed: number
  readonly consumers: number
  readonly maxKills: number
  /** Kills taken whatever `budgetMs` says, unless the queue drains first. */
  readonly minKills?: number
  readonly budgetMs: number
  /** The kill window, from the time the uninterrupted run worked. */
  readonly activeMs: (referenceActiveMs: number) => number
  readonly ledgers: { readonly reference: string | undefined; readonly killed: string | undefined }
  readonly newLedger: () => Promise<{ readonly url: string | undefined } & AsyncDisposable>
  readonly env?: Record<string, string>
  readonly maxAttempts?: number
  /** What runs, as consumeWithRandomKills takes it; the reference and the reruns run it too. */
  readonly bin?: string
}) {
  const src = join(o.dir, "src")
  const withLedger = (url: string | undefined) => [...o.args, ...(url === undefined ? [] : ["--ledger", url])]
  makeQueueFrom(src, join(o.dir, "reference"))
  makeQueueFrom(src, join(o.dir, "killed"))
  const reference = await timeConsume(join(o.dir, "reference"), withLedger(o.ledgers.reference), o.bin)
  const activeMs = o.activeMs(reference.activeMs)
  const run = await consumeWithRandomKills(join(o.dir, "killed"), {
    random: rng(o.seed),
    args: o.args,
    maxKills: o.maxKills,
    ...(o.minKills !== undefined && { minKills: o.minKills }),
    budgetMs: o.budgetMs,
    activeMs,
    consumers: o.consumers,
    ...(o.ledgers.killed !== undefined && { ledgerUrl: o.ledgers.killed }),
    ...(o.env !== undefined && { env: o.env }),
    ...(o.bin !== undefined && { bin: o.bin }),
  })
  const actual = await endState(join(o.dir, "killed"), o.ledgers.killed)
  const { expected, poisonedByKills } = await expectedAfterKills({
    reference: await endState(join(o.dir, "reference"), o.ledgers.reference),
    actual,
    kills: run.kills,
    ...(o.maxAttempts !== undefined && { maxAttempts: o.maxAttempts }),
    rerun: async (env) => {
      await using crashLedger = await o.newLedger()
      const root = join(o.dir, "crash-on")
      makeQueueFrom(src, root)
      await consumeUntilDone(root, withLedger(crashLedger.url), env, o.bin)
      return await endState(root, crashLedger.url)
    },
  })
  return { expected, actual, run, activeMs, poisonedByKills }
}

/**
 * Every difference between two end states, as short readable lines (empty when equivalent):
 * which file is missing, extra or different in which directory, which ledger row differs.
 */
export function diffSnapshots(expected: Snapshot, actual: Snapshot, limit = 20): string[] {
  const out: string[] = []
  const dirs = ["inbox", "processing", "done", "error"] as const
  for (const d of dirs) {
    const e = expected[d]
    const a = actual[d]
    for (const name of new Set([...Object.keys(e), ...Object.keys(a)])) {
      if (!(name in a)) out.push(`${d}/${name}: missing`)
      else if (!(name in e)) out.push(`${d}/${name}: unexpected`)
      else if (e[name] !== a[name]) out.push(`${d}/${name}: different content`)
    }
  }
  const tables = ["processed", "duplicates", "failures", "claims"] as const
  for (const t of tables) {
    const e = new Set(expected[t].map((r) => JSON.stringify(r)))
    const a = new Set(actual[t].map((r) => JSON.stringify(r)))
    if (expected[t].length !== actual[t].length)
      out.push(`${t}: ${expected[t].length} rows expected, ${actual[t].length} found`)
    for (const r of e) if (!a.has(r)) out.push(`${t}: missing row ${r}`)
    for (const r of a) if (!e.has(r)) out.push(`${t}: unexpected row ${r}`)
  }
  if (expected.dupTxt !== actual.dupTxt) out.push("dup.txt differs")
  if (expected.errorCsv !== actual.errorCsv) out.push("error.csv differs")
  return out.length > limit ? [...out.slice(0, limit), `... and ${out.length - limit} more`] : out
}

type Delivery = { msg_id: string; file: string; payload_hash: string }

/**
 * The end state with the one thing concurrency may legitimately change factored out: which
 * delivery of a msg_id came first. With several consumers the order of commits is a race, so
 * the processed row of a redelivered msg_id may name either file, and whether a later delivery
 * is flagged as a conflict depends on which came first. Everything else must be equal as is.
 */
export function withoutWinners(s: Snapshot) {
  const deliveries = new Map<string, string[]>()
  for (const d of [...(s.processed as Delivery[]), ...(s.duplicates as Delivery[])])
    deliveries.set(d.msg_id, [...(deliveries.get(d.msg_id) ?? []), `${d.file}:${d.payload_hash}`].sort())
  return {
    inbox: s.inbox,
    processing: s.processing,
    done: s.done,
    error: s.error,
    failures: s.failures,
    claims: s.claims,
    dupTxt: s.dupTxt,
    errorCsv: s.errorCsv,
    processedIds: (s.processed as Delivery[]).map((r) => r.msg_id),
    deliveries: Object.fromEntries([...deliveries].sort(([a], [b]) => (a < b ? -1 : 1))),
  }
}

/** The differences between two end states that concurrency cannot excuse (see withoutWinners). */
export function diffIgnoringWinners(expected: Snapshot, actual: Snapshot): string[] {
  const e = withoutWinners(expected)
  const a = withoutWinners(actual)
  return (Object.keys(e) as (keyof typeof e)[])
    .filter((k) => !Bun.deepEquals(e[k], a[k]))
    .map((k) => `${k} differs${sampleDifferences(e[k], a[k])}`)
}

/** A few of the entries by which two values of an end state differ, for a readable report. */
function sampleDifferences(expected: unknown, actual: unknown, limit = 3): string {
  const entries = (v: unknown): string[] =>
    Array.isArray(v)
      ? v.map((x) => JSON.stringify(x))
      : typeof v === "object" && v !== null
        ? Object.entries(v).map(([k, x]) => `${k}: ${JSON.stringify(x)}`)
        : [JSON.stringify(v)]
  const e = entries(expected)
  const a = entries(actual)
  const missing = e.filter((x) => !a.includes(x))
  const unexpected = a.filter((x) => !e.includes(x))
  const show = (xs: string[]) =>
    xs.slice(0, limit).join("; ") + (xs.length > limit ? `; ... ${xs.length - limit} more` : "")
  return [
    missing.length > 0 ? `; missing: ${show(missing)}` : "",
    unexpected.length > 0 ? `; unexpected: ${show(unexpected)}` : "",
  ].join("")
}
