// Shared by the crash, concurrency and signal tests and by `bun run torture`: a generator of
// realistic, nasty queues, a driver that SIGKILLs the real consume process at random points,
// and a comparison of two end states that names every difference.
import { Database } from "bun:sqlite"
import fs from "node:fs"
import { join } from "node:path"
import { SQL } from "bun"
import { endState, type Snapshot } from "./end-state.ts"
import { repoRoot } from "./repo.ts"

export const consumeBin = join(repoRoot, "packages/consumer/bin/consume.ts")

/** A small, fast, seedable PRNG (mulberry32): the same seed gives the same queue and kill plan. */
export function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** What a generated queue holds, by kind, so tests can check the outcome adds up. */
export interface GeneratedMix {
  valid: number
  sameDuplicate: number
  reformattedDuplicate: number
  conflict: number
  badJson: number
  missingField: number
  invalidField: number
}

/**
 * Writes `count` message files into `dir`: mostly valid messages, plus redeliveries of an
 * earlier msg_id (byte-identical, reformatted, and with a different payload), JSON that does
 * not parse, messages missing a required field and messages with a wrongly typed field.
 * Names are random, so neither name order nor directory order follows seq.
 */
export function generateMessages(dir: string, count: number, seed: number): GeneratedMix {
  const random = rng(seed)
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T
  const hex = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 16).toString(16)).join("")
  const mix: GeneratedMix = {
    valid: 0,
    sameDuplicate: 0,
    reformattedDuplicate: 0,
    conflict: 0,
    badJson: 0,
    missingField: 0,
    invalidField: 0,
  }
  const sent: { text: string; value: Record<string, unknown> }[] = []
  const seqOf = new Map<string, number>()
  fs.mkdirSync(dir, { recursive: true })
  const names = new Set<string>()
  for (let i = 0; i < count; i++) {
    let name = `m-${hex(10)}.json`
    while (names.has(name)) name = `m-${hex(10)}.json`
    names.add(name)
    const r = random()
    let text: string
    // Half the redeliveries come from a small hot set, so that batches often hold two
    // deliveries of one msg_id and the order in which a batch is processed matters.
    const from = () => (random() < 0.5 ? sent.slice(0, 8) : sent)
    if (sent.length > 0 && r < 0.06) {
      text = (pick(from()) as { text: string }).text
      mix.sameDuplicate++
    } else if (sent.length > 0 && r < 0.09) {
      const v = (pick(from()) as { value: Record<string, unknown> }).value
      text = JSON.stringify(Object.fromEntries(Object.entries(v).reverse()), null, 2)
      mix.reformattedDuplicate++
    } else if (sent.length > 0 && r < 0.12) {
      const v = (pick(from()) as { value: Record<string, unknown> }).value
      text = JSON.stringify({ ...v, amount: Math.round(random() * 1e6) / 100, note: "resent with changes" })
      mix.conflict++
    } else if (r < 0.16) {
      text = pick([`{"msg_id": "x-${hex(6)}", "amount": 1.`, "", "not json", "[1, 2", '{"a":1}}', "\u00ff\u00fe"])
      mix.badJson++
    } else if (r < 0.19) {
      const v: Record<string, unknown> = { msg_id: `x-${hex(8)}`, order_no: "Z-1", seq: 1, amount: 1 }
      delete v[pick(["msg_id", "order_no", "seq", "amount"])]
      text = JSON.stringify(v)
      mix.missingField++
    } else if (r < 0.21) {
      text = JSON.stringify({ msg_id: `x-${hex(8)}`, order_no: "Z-2", seq: pick([0, -1, 1.5, "3"]), amount: 2 })
      mix.invalidField++
    } else {
      const orderNo = `O-${Math.floor(random() * 400)}`
      const seq = (seqOf.get(orderNo) ?? 0) + 1
      seqOf.set(orderNo, seq)
      const cents = Math.floor(random() * 1e7)
      const value = {
        msg_id: `m-${hex(12)}`,
        order_no: orderNo,
        seq,
        amount: `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, "0")}`,
        currency: pick(["EUR", "USD", "JPY"]),
        customer: pick(["Globex", "Initech", 'Acme, "Inc."', "Umbrella\nCorp"]),
      }
      // The amount is written as a bare decimal (e.g. 12.10), exactly as a producer would.
      text = JSON.stringify(value).replace(/"amount":"([\d.]+)"/, '"amount":$1')
      sent.push({ text, value: JSON.parse(text) })
      mix.valid++
    }
    fs.writeFileSync(join(dir, name), text)
  }
  return mix
}

/** Creates a queue root at `root` whose inbox/ holds a copy of every file in `source`, copied in name order. */
export function makeQueueFrom(source: string, root: string): void {
  for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
  // Same order of creation for every copy, so every copy lists its inbox/ in the same order.
  for (const name of fs.readdirSync(source).sort()) fs.copyFileSync(join(source, name), join(root, "inbox", name))
}

/** A consume process started with Bun.spawn, its stderr collected. */
export interface Consumer {
  readonly proc: Bun.Subprocess<"ignore", "ignore", "pipe">
  /** Resolves when the process has exited and its stderr has been read to the end. */
  readonly finished: Promise<{ exitCode: number | null; signalCode: string | null; stderr: string }>
}

export function startConsume(root: string, args: readonly string[] = [], env: Record<string, string> = {}): Consumer {
  const proc = Bun.spawn(["bun", consumeBin, "--root", root, ...args], {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdin: "ignore",
    stdout: "ignore",
    stderr: "pipe",
  })
  const finished = (async () => {
    const stderr = await new Response(proc.stderr).text()
    await proc.exited
    const signalCode = proc.signalCode === null ? null : String(proc.signalCode)
    return { exitCode: proc.exitCode, signalCode, stderr }
  })()
  return { proc, finished }
}

/** Runs consume to its end and returns what it said; throws unless it exited 0. */
export async function consumeToEnd(root: string, args: readonly string[] = [], env: Record<string, string> = {}) {
  const r = await startConsume(root, args, env).finished
  if (r.exitCode !== 0)
    throw new Error(`consume --root ${root} ${args.join(" ")} exited ${r.exitCode ?? r.signalCode}:\n${r.stderr}`)
  return r
}

/**
 * Runs consume to its end (it must exit 0) and measures it: start-up (until the run first
 * changes the queue, polled every 10 ms) and the time it then worked. Random kills are
 * scaled by the latter, so that they land all over a run on a fast machine and a slow one.
 */
export async function timeConsume(root: string, args: readonly string[] = []) {
  const before = mtimes(root)
  const spawnedAt = performance.now()
  const c = startConsume(root, args)
  let hasExited = false
  void c.finished.then(() => {
    hasExited = true
  })
  let activeAt: number | undefined
  while (!hasExited && activeAt === undefined) {
    await Bun.sleep(10)
    if (mtimes(root) !== before) activeAt = performance.now()
  }
  const r = await c.finished
  if (r.exitCode !== 0) throw new Error(`consume --root ${root} exited ${r.exitCode ?? r.signalCode}:\n${r.stderr}`)
  const end = performance.now()
  return { startupMs: (activeAt ?? end) - spawnedAt, activeMs: end - (activeAt ?? end) }
}

/** What the ledger and processing/ held right after a kill: which step of the protocol the kill interrupted. */
export interface KillObservation {
  /** Time from spawn to kill. */
  readonly delayMs: number
  /** Files in processing/ (claimed, renamed, not yet moved out), whoever holds them. */
  readonly inProcessing: number
  /** Claim rows of the killed process not yet committed: it had a batch in hand. */
  readonly claimed: number
  /** Claim rows of the killed process committed whose file was still in processing/: the kill fell between commit and move. */
  readonly committedNotMoved: number
  /**
   * Files the killed process was retrying alone (an attempt counted, not yet committed), with
   * the attempts: a death with the file in hand, which is what the poison counter counts.
   */
  readonly inHandAlone: readonly { readonly name: string; readonly attempts: number }[]
  readonly inbox: number
}

/** What a kill of process `pid` left: its own claims in the ledger, and the queue directories. */
export async function observe(
  root: string,
  delayMs: number,
  pid: number,
  ledgerUrl?: string,
): Promise<KillObservation> {
  const processing = new Set(fs.readdirSync(join(root, "processing")))
  let claimed = 0
  let committedNotMoved = 0
  const inHandAlone: { name: string; attempts: number }[] = []
  for (const r of await claimStates(root, ledgerUrl)) {
    if (r.pid !== pid) continue
    if (r.state === "claimed") {
      claimed++
      if (r.attempts >= 2) inHandAlone.push({ name: r.name, attempts: r.attempts })
    } else if (processing.has(r.name)) committedNotMoved++
  }
  return {
    delayMs,
    inProcessing: processing.size,
    claimed,
    committedNotMoved,
    inHandAlone,
    inbox: fs.readdirSync(join(root, "inbox")).length,
  }
}

interface ClaimState {
  readonly name: string
  readonly state: string
  readonly attempts: number
  /** The owner's pid, from its consumers row. */
  readonly pid: number | null
}

const claimStatesSql =
  "SELECT c.name, c.state, c.attempts, o.pid FROM claims c LEFT JOIN consumers o ON o.owner_id = c.owner_id"

/** The claim rows of a root's ledger with their owners' pids (none if it has no ledger yet). */
async function claimStates(root: string, ledgerUrl?: string): Promise<ClaimState[]> {
  if (ledgerUrl !== undefined) {
    const sql = new SQL({ url: ledgerUrl, max: 1 })
    try {
      return (await sql.unsafe(claimStatesSql)).map((r: ClaimState) => ({
        ...r,
        pid: r.pid === null ? null : Number(r.pid),
      }))
    } catch {
      return [] // the kill can fall before the ledger's schema exists
    } finally {
      await sql.close()
    }
  }
  if (!fs.existsSync(join(root, "ledger.db"))) return []
  const db = new Database(join(root, "ledger.db"))
  try {
    db.exec("PRAGMA busy_timeout = 10000")
    return db.query(claimStatesSql).all() as ClaimState[]
  } catch {
    return [] // the kill can fall before the ledger's schema exists
  } finally {
    db.close()
  }
}

/**
 * The files random kills made poison by design: each was in hand, retried alone, at enough
 * kills to reach the poison threshold (`--max-attempts`, at least 2; the first claim is the
 * batch's). A count is credited once: a claim adopted with the attempts of an earlier death
 * and killed before its own count is not a second death in hand.
 */
export function poisonedByKills(kills: readonly KillObservation[], maxAttempts = 3): string[] {
  const credited = new Map<string, number>()
  const highest = new Map<string, number>()
  for (const k of kills)
    for (const { name, attempts } of k.inHandAlone) {
      if (attempts <= (highest.get(name) ?? 1)) continue
      highest.set(name, attempts)
      credited.set(name, (credited.get(name) ?? 0) + 1)
    }
  const deaths = Math.max(maxAttempts, 2) - 1
  return [...credited].filter(([, n]) => n >= deaths).map(([name]) => name)
}

/**
 * The end state a run under random kills must reach. That is the uninterrupted `reference`'s,
 * unless the kills made a file poison by design (see poisonedByKills): then it is the state of
 * an uninterrupted run in which that file crashes the consumer whenever it is judged
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
  const explained = poisoned.filter((name) => byKills.includes(name))
  // One file twice in hand at two kills is rare; two such files in one run would need a
  // reference that crashes on both, which SPOOL_CRASH_ON (one name) cannot make.
  if (explained.length !== 1 || poisoned.length !== 1) return { expected: o.reference, poisonedByKills: [] }
  return { expected: await o.rerun({ SPOOL_CRASH_ON: explained[0] as string }), poisonedByKills: explained }
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
  readonly budgetMs: number
  /** The kill window, from the time the uninterrupted run worked. */
  readonly activeMs: (referenceActiveMs: number) => number
  readonly ledgers: { readonly reference: string | undefined; readonly killed: string | undefined }
  readonly newLedger: () => Promise<{ readonly url: string | undefined } & AsyncDisposable>
  readonly env?: Record<string, string>
  readonly maxAttempts?: number
}) {
  const src = join(o.dir, "src")
  const withLedger = (url: string | undefined) => [...o.args, ...(url === undefined ? [] : ["--ledger", url])]
  makeQueueFrom(src, join(o.dir, "reference"))
  makeQueueFrom(src, join(o.dir, "killed"))
  const reference = await timeConsume(join(o.dir, "reference"), withLedger(o.ledgers.reference))
  const activeMs = o.activeMs(reference.activeMs)
  const run = await consumeWithRandomKills(join(o.dir, "killed"), {
    random: rng(o.seed),
    args: o.args,
    maxKills: o.maxKills,
    budgetMs: o.budgetMs,
    activeMs,
    consumers: o.consumers,
    ...(o.ledgers.killed !== undefined && { ledgerUrl: o.ledgers.killed }),
    ...(o.env !== undefined && { env: o.env }),
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
      await consumeUntilDone(root, withLedger(crashLedger.url), env)
      return await endState(root, crashLedger.url)
    },
  })
  return { expected, actual, run, activeMs, poisonedByKills }
}

/** Runs consume on `root` again and again until a run exits 0 (each other run must end by SIGKILL). */
export async function consumeUntilDone(root: string, args: readonly string[], env: Record<string, string>) {
  for (let i = 0; i < 20; i++) {
    const r = await startConsume(root, args, env).finished
    if (r.exitCode === 0) return
    if (r.signalCode !== "SIGKILL") throw new Error(`consume exited ${r.exitCode}:\n${r.stderr}`)
  }
  throw new Error(`consume --root ${root} never finished under ${JSON.stringify(env)}`)
}

/** What a random-kill run did. */
export interface KillRun {
  readonly kills: KillObservation[]
  /** Runs started, the final one included. */
  readonly starts: number
  readonly stderr: string[]
}

const mtimes = (root: string) =>
  `${fs.statSync(join(root, "inbox")).mtimeMs}/${fs.statSync(join(root, "processing")).mtimeMs}`

/**
 * Runs consume on `root` again and again, SIGKILLing each run at a random point, until a round
 * ends with an empty inbox/ or the kill budget (count or time) is spent; then one more run to
 * completion, which must exit 0. With `consumers` > 1, each round starts that many processes at
 * once, each with its own kill time. Start-up time varies a lot on a loaded machine, so most
 * kills are timed from the moment the round starts changing the queue (inbox/ or processing/
 * changes its mtime; polled every 10 ms): a random delay in [0, activeMs). One kill in five is
 * timed from the spawn instead, to land in start-up and recovery. A run still going when inbox/
 * is empty is killed then, whatever its delay: the reference run that `activeMs` comes from may
 * have been slowed by the machine's load, and a round that drained the queue unharmed would
 * leave the test without a kill. A run that ends on its own must exit 0 and never report a
 * locked ledger.
 */
export async function consumeWithRandomKills(
  root: string,
  options: {
    readonly random: () => number
    readonly args?: readonly string[]
    readonly maxKills: number
    readonly budgetMs: number
    readonly activeMs: number
    readonly consumers?: number
    /** The root's PostgreSQL ledger; passed to every run as --ledger. */
    readonly ledgerUrl?: string
    /** Environment for every run (a test hook such as SPOOL_CRASH_ON). */
    readonly env?: Record<string, string>
  },
): Promise<KillRun> {
  const args = [...(options.args ?? []), ...(options.ledgerUrl === undefined ? [] : ["--ledger", options.ledgerUrl])]
  const kills: KillObservation[] = []
  const stderr: string[] = []
  const started = performance.now()
  let starts = 0
  let startupMs = 500
  while (kills.length < options.maxKills && performance.now() - started < options.budgetMs) {
    const before = mtimes(root)
    const spawnedAt = performance.now()
    const round = Array.from({ length: options.consumers ?? 1 }, () => {
      const fromSpawn = options.random() < 0.2
      const delayMs = Math.round(options.random() * (fromSpawn ? startupMs * 1.5 : options.activeMs))
      const c = startConsume(root, args, options.env)
      let hasExited = false
      void c.finished.then(() => {
        hasExited = true
      })
      return { c, fromSpawn, delayMs, hasExited: () => hasExited }
    })
    starts += round.length
    const allExited = () => round.every((p) => p.hasExited())
    const activity = (async () => {
      for (const deadline = performance.now() + 60_000; performance.now() < deadline && !allExited(); ) {
        await Bun.sleep(10)
        if (mtimes(root) !== before) return performance.now()
      }
      return undefined
    })()
    await Promise.all(
      round.map(async (p) => {
        const from = p.fromSpawn ? spawnedAt : await activity
        if (from !== undefined) {
          let timer: Timer | undefined
          const wait = Math.max(0, from + p.delayMs - performance.now())
          const drained = untilInboxEmpty(root, p.hasExited)
          await Promise.race([
            p.c.finished,
            drained.promise,
            new Promise((resolve) => (timer = setTimeout(resolve, wait))),
          ])
          clearTimeout(timer)
          drained.stop()
        }
        if (!p.hasExited()) p.c.proc.kill("SIGKILL")
        const r = await p.c.finished
        if (r.signalCode === "SIGKILL")
          kills.push(await observe(root, Math.round(performance.now() - spawnedAt), p.c.proc.pid, options.ledgerUrl))
        else if (r.exitCode !== 0 || /database is locked/i.test(r.stderr))
          throw new Error(`consume exited ${r.exitCode} between kills:\n${r.stderr}`)
        else stderr.push(r.stderr)
      }),
    )
    const activeAt = await activity
    if (activeAt !== undefined) startupMs = activeAt - spawnedAt
    if (fs.readdirSync(join(root, "inbox")).length === 0) break
  }
  // The last run goes to its end; only a crash hook in `env` can kill it (a file that crashes
  // every consumer that reads it), and then the next one goes on until the file is poison.
  for (let i = 0; ; i++) {
    starts++
    const spawnedAt = performance.now()
    const c = startConsume(root, args, options.env)
    const r = await c.finished
    if (r.exitCode === 0) {
      stderr.push(r.stderr)
      break
    }
    if (r.signalCode !== "SIGKILL" || options.env === undefined || i >= 20)
      throw new Error(`consume --root ${root} ${args.join(" ")} exited ${r.exitCode ?? r.signalCode}:\n${r.stderr}`)
    kills.push(await observe(root, Math.round(performance.now() - spawnedAt), c.proc.pid, options.ledgerUrl))
  }
  return { kills, starts, stderr }
}

/** Resolves once inbox/ is empty (polled every 10 ms) while `hasExited` is false; `stop` ends the polling. */
function untilInboxEmpty(root: string, hasExited: () => boolean) {
  let stopped = false
  const promise = (async () => {
    while (!stopped && !hasExited()) {
      await Bun.sleep(10)
      if (fs.readdirSync(join(root, "inbox")).length === 0) return
    }
    await new Promise(() => {}) // never: the other racers decide
  })()
  return {
    promise,
    stop: () => {
      stopped = true
    },
  }
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

/** Sums kill observations into the protocol windows they interrupted. */
export function summarizeKills(kills: readonly KillObservation[]) {
  return {
    kills: kills.length,
    inFlight: kills.filter((k) => k.claimed > 0).length,
    committedNotMoved: kills.filter((k) => k.committedNotMoved > 0).length,
    idle: kills.filter((k) => k.claimed === 0 && k.committedNotMoved === 0).length,
  }
}
