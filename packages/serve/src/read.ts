// What the console shows, read with the same code as the commands that print it: lag's scan and
// histogram, stats' ledger figures, list's annotated directories, show's history. Each reader
// opens the ledger read-only, asks its questions and closes it, so no transaction outlives a
// request and a consumer never waits on the console.
import { type ListEntry, listDir } from "@spool/consumer/list"
import { type ShowReport, showOf } from "@spool/consumer/show"
import { byClass, type Stats, statsOf } from "@spool/consumer/stats"
import { statsMetrics } from "@spool/consumer/stats-metrics"
import {
  type Backlog,
  classOf,
  describeSource,
  Exposition,
  type LedgerHistory,
  type LedgerPort,
  openExistingLedger,
  openQueue,
  type Queue,
  type QueueDir,
  readBacklog,
  wallClock,
} from "@spool/core/engine"
import { formatPrometheus, isStalled, type LagReport, lagViolations, measureLag } from "@spool/ops"

/** Where the console reads from: one queue root and, for PostgreSQL, its ledger's URL. */
export interface Source {
  readonly root: string
  readonly url: string | undefined
  /** The window of stats' recent figures, in ms, and as the operator wrote it. */
  readonly windowMs: number
  readonly windowText: string
  /** The idle time after which lag calls a queue with waiting files stalled, in seconds. */
  readonly stalledAfterSeconds: number
  /** Broker source URLs as given to serve, with their passwords: how to ask a landed source's broker. */
  readonly brokers?: readonly string[]
}

/** A broker source the root consumed from (or serve was given), without its password, and its backlog there. */
export interface SourceBacklog {
  readonly source: string
  readonly backlog: Backlog
}

/** A consumer holding claims now, with its last heartbeat. */
export interface Holder {
  readonly owner: string
  readonly claims: number
  readonly heartbeatAt: string
  readonly heartbeatAgeSeconds: number
}

/** Everything the overview page shows. */
export interface Overview {
  readonly root: string
  /** When it was read: a reading answers requests for a while (readings.ts). */
  readonly readAt: string
  readonly lag: LagReport
  readonly stalled: boolean
  /** lag's words: `OK`, or each limit crossed. */
  readonly verdict: readonly string[]
  readonly stats: Stats & { readonly failuresByClass: ReturnType<typeof byClass> }
  readonly holders: readonly Holder[]
  /** Each broker source's backlog, read from the broker at each reading. */
  readonly sources: readonly SourceBacklog[]
}

/** Opens the root's queue and ledger (undefined when none is set up yet), runs `fn`, closes the ledger. */
export async function withLedger<T>(
  source: Source,
  fn: (queue: Queue, ledger: LedgerPort | undefined) => Promise<T>,
): Promise<T> {
  const queue = openQueue(source.root)
  const ledger = await openExistingLedger(queue, { url: source.url, readonly: true, isLostLedgerRefused: true })
  try {
    return await fn(queue, ledger)
  } finally {
    await ledger?.close()
  }
}

/** The overview: lag's counts, ages and histogram, stats' figures, who holds claims, and each source's backlog. */
export async function readOverview(source: Source): Promise<Overview> {
  const [queue, sources] = await Promise.all([readQueueOverview(source), readSources(source)])
  return { ...queue, sources }
}

/** The overview without the brokers: what the root and its ledger say. */
export async function readQueueOverview(source: Source): Promise<Omit<Overview, "sources">> {
  const queue = openQueue(source.root)
  const lag = measureLag(queue, "full", Date.now(), { histogram: true })
  const limits = { threshold: undefined, maxAgeSeconds: undefined, stalledAfterSeconds: source.stalledAfterSeconds }
  const holders = await withLedger(source, async (_q, ledger) => holdersOf(ledger))
  // statsOf closes the ledger it is given.
  const since = new Date(wallClock() - source.windowMs)
  const stats = await statsOf(
    queue,
    await openExistingLedger(queue, { url: source.url, readonly: true, isLostLedgerRefused: true }),
    since,
  )
  return {
    root: queue.root,
    readAt: new Date(wallClock()).toISOString(),
    lag,
    stalled: isStalled(lag, source.stalledAfterSeconds),
    verdict: lagViolations(lag, limits),
    stats: { ...stats, failuresByClass: byClass(stats.allTime) },
    holders,
  }
}

/**
 * The backlog of each broker source the ledger keeps origins of, and of each one serve was
 * given, read from the brokers at once. The ledger keeps a URL without its password: a given
 * URL that describes the same source is the one connected with.
 */
export async function readSources(source: Source): Promise<SourceBacklog[]> {
  const landed = await withLedger(source, async (_q, ledger) => (await ledger?.landedSources()) ?? [])
  const withPassword = new Map<string, string>()
  for (const url of source.brokers ?? []) withPassword.set(await describeSource(url), url)
  const all = [...new Set([...landed, ...withPassword.keys()])].sort()
  return Promise.all(
    all.map(async (described) => {
      const url = withPassword.get(described)
      const backlog = await readBacklog(url ?? described)
      if (backlog.state !== "unreachable" || url !== undefined || !/^[a-z]+:\/\/[^/@]+@/i.test(described))
        return { source: described, backlog }
      const hint = "; the ledger keeps the URL without its password: give spool serve --source with it"
      return { source: described, backlog: { ...backlog, reason: backlog.reason + hint } }
    }),
  )
}

async function holdersOf(ledger: LedgerPort | undefined): Promise<Holder[]> {
  if (ledger === undefined) return []
  const byOwner = new Map<string, Holder>()
  for (const c of await ledger.listClaims()) {
    if (c.owner === undefined) continue
    const owner = `${c.owner.host}:${c.owner.pid}`
    const held = byOwner.get(owner)
    byOwner.set(owner, {
      owner,
      claims: (held?.claims ?? 0) + 1,
      heartbeatAt: c.owner.heartbeatAt,
      heartbeatAgeSeconds: Math.floor(c.owner.heartbeatAgeMs / 1000),
    })
  }
  return [...byOwner.values()]
}

/** An error/ file with its latest failure (as list shows it) and every recorded attempt, the latest first. */
export interface FailedFile {
  readonly entry: ListEntry
  readonly attempts: readonly LedgerHistory["failures"][number][]
  readonly replays: number
}

/** The error/ files grouped by class, then reason (`unknown` where the ledger has no row). */
export interface FailureGroup {
  readonly class: string
  readonly reason: string
  readonly files: readonly FailedFile[]
}

/** At most this many files of a directory are shown; `more` counts the rest. */
export const pageLimit = 500

/** Which failures a page or request asks for: one class, one reason, or both; all when empty. */
export interface FailureFilter {
  readonly class?: string | undefined
  readonly reason?: string | undefined
}

/** The error/ files by class and reason, each with its attempts; `more` files were not read. */
export async function readFailures(
  source: Source,
  filter: FailureFilter = {},
): Promise<{ groups: FailureGroup[]; more: number }> {
  return withLedger(source, async (queue, ledger) => {
    // Filtered before the page's limit, so that a reason is found however many files come first.
    const isShown = (e: ListEntry) =>
      (filter.class === undefined || classOfEntry(e) === filter.class) &&
      (filter.reason === undefined || reasonOfEntry(e) === filter.reason)
    const isFiltered = filter.class !== undefined || filter.reason !== undefined
    const { entries, more } = await entriesOf(queue, "error", ledger, isFiltered ? isShown : undefined)
    const history = await ledger?.history({ files: entries.map((e) => e.name) })
    const groups = new Map<string, FailureGroup & { files: FailedFile[] }>()
    for (const entry of entries) {
      const reason = reasonOfEntry(entry)
      const cls = classOfEntry(entry)
      const key = `${cls}\0${reason}`
      const group = groups.get(key) ?? { class: cls, reason, files: [] }
      groups.set(key, group)
      const attempts = (history?.failures ?? []).filter((f) => f.file === entry.name).sort((a, b) => b.id - a.id)
      const replays = (history?.replays ?? []).filter((r) => r.file === entry.name).length
      group.files.push({ entry, attempts, replays })
    }
    return { groups: [...groups.values()], more }
  })
}

/**
 * A file's reason in error/, `unknown` for one the ledger has no failure of (put there by hand,
 * or left from a lost ledger), which no replay selection by reason or class takes.
 */
const reasonOfEntry = (e: ListEntry): string => e.failure?.reason ?? "unknown"
const classOfEntry = (e: ListEntry): string => e.failure?.class ?? (e.failure ? classOf(e.failure.reason) : "unknown")

/** The deferred/ files with their next attempt, as list shows them. */
export async function readDeferred(source: Source): Promise<{ entries: ListEntry[]; more: number }> {
  return withLedger(source, (queue, ledger) => entriesOf(queue, "deferred", ledger))
}

/** A file's or a msg_id's history, as `spool show` finds it; undefined when nothing knows it. */
export async function readMessage(source: Source, query: string): Promise<ShowReport | undefined> {
  return withLedger(source, (queue, ledger) => showOf(queue, ledger, query))
}

/** The Prometheus text of `lag --format prometheus` and `stats --format prometheus` of an overview, and each source's backlog. */
export function metricsOf(source: Source, o: Overview): string {
  const limits = { threshold: undefined, maxAgeSeconds: undefined, stalledAfterSeconds: source.stalledAfterSeconds }
  const lag = formatPrometheus(o.lag, limits, o.verdict)
  return (
    lag + statsMetrics(o.stats, o.root, source.windowText) + sourceMetrics(o.root, o.sources) + consoleMetrics(o, true)
  )
}

/**
 * The metrics of the files alone, for a scrape while the ledger cannot be read (its server down,
 * a refusal): lag's series, which need no ledger, and spool_ledger_up 0, so that backlog alerts
 * keep working and the ledger's absence can be alerted on, instead of the whole scrape failing.
 */
export function metricsWithoutLedger(source: Source): string {
  const queue = openQueue(source.root)
  const lag = measureLag(queue, "full", Date.now(), { histogram: true })
  const limits = { threshold: undefined, maxAgeSeconds: undefined, stalledAfterSeconds: source.stalledAfterSeconds }
  const readAt = new Date(wallClock()).toISOString()
  return formatPrometheus(lag, limits, lagViolations(lag, limits)) + consoleMetrics({ root: queue.root, readAt }, false)
}

/** Whether the ledger could be read, and when the figures were (a scrape answers from the latest reading). */
function consoleMetrics(o: { readonly root: string; readonly readAt: string }, isLedgerUp: boolean): string {
  return new Exposition()
    .gauge(
      "spool_ledger_up",
      "1 when the console read the ledger for this scrape; 0 when it could not (see /healthz).",
      [[{ root: o.root }, isLedgerUp ? 1 : 0]],
    )
    .gauge("spool_console_read_timestamp_seconds", "When the console read the figures of this scrape (Unix time).", [
      [{ root: o.root }, Date.parse(o.readAt) / 1000],
    ])
    .text()
}

/** Each source's backlog as gauges; whether its broker answered, so a missing figure can be alerted on. */
function sourceMetrics(root: string, sources: readonly SourceBacklog[]): string {
  if (sources.length === 0) return ""
  const read = sources.flatMap((s) => (s.backlog.state === "read" ? [{ source: s.source, b: s.backlog }] : []))
  return new Exposition()
    .gauge(
      "spool_source_up",
      "1 when the source's broker answered how many messages it holds; 0 when it is unreachable or cannot tell (MQTT).",
      sources.map((s) => [{ root, source: s.source }, s.backlog.state === "read" ? 1 : 0] as const),
    )
    .gauge(
      "spool_source_waiting",
      "Messages the broker holds for the source and has not delivered (RabbitMQ ready, JetStream num_pending, Redis group lag).",
      read.map(({ source, b }) => [{ root, source }, b.waiting] as const),
    )
    .gauge(
      "spool_source_unacked",
      "Messages delivered to the source and not yet acknowledged (JetStream num_ack_pending, Redis pending); not known over AMQP.",
      read.flatMap(({ source, b }) => (b.unacked === undefined ? [] : [[{ root, source }, b.unacked] as const])),
    )
    .text()
}

/** Whether the root and its ledger can be read: undefined when they can, else why not. */
export async function readHealth(source: Source): Promise<string | undefined> {
  try {
    await withLedger(source, async (_queue, ledger) => ledger?.listConsumers())
    return undefined
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  }
}

async function entriesOf(
  queue: Queue,
  dir: QueueDir,
  ledger: LedgerPort | undefined,
  keep?: (entry: ListEntry) => boolean,
): Promise<{ entries: ListEntry[]; more: number }> {
  const entries: ListEntry[] = []
  const more = await listDir(
    queue,
    dir,
    ledger,
    pageLimit,
    async (chunk) => {
      entries.push(...chunk)
    },
    keep,
  )
  return { entries, more }
}
