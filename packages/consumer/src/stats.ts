import { type CommandSpec, choice, duration, json, ledger, root, runCommand, text } from "@spool/cli"
import {
  classOf,
  type ErrorClass,
  ExitCode,
  emptyStats,
  type LedgerPort,
  type LedgerStats,
  openExistingLedger,
  openFailuresIn,
  openQueue,
  type Queue,
  redact,
  resolveLedgerUrl,
  resolveRoot,
  SpoolError,
  type StatsPeriod,
  wallClock,
  writeTextfile,
} from "@spool/core/engine"
import { statsMetrics } from "./stats-metrics.ts"

/** `bun run stats`'s options and help. */
export const spec = {
  name: "stats",
  usage:
    "bun run stats [--root DIR] [--ledger URL] [--json | --format prometheus [--textfile PATH]] [--window DURATION] [--max-duplicate-rate R]",
  summary: "Ledger statistics, over all time and over a recent window; alerts on the duplicate rate.",
  description:
    "Reads the ledger and prints what the consumer has done, over all time and over a recent window:\n" +
    "messages processed, duplicates and the duplicate rate (duplicates / (processed + duplicates)),\n" +
    "conflicts (duplicates whose content differs), failures by reason and by class (format: fix at the\n" +
    "source; business: re-injectable), poison messages and replays. --format prometheus exports the same\n" +
    "as metrics; --max-duplicate-rate exits 1 when the window's rate is above R, for cron.\n" +
    "Read-only: safe to run while consumers are working. A queue with no ledger yet shows zeros.",
  options: {
    root,
    ledger,
    window: duration("the recent window, e.g. 15m, 24h, 7d", { default: "24h", min: 1 }),
    json: { ...json, help: "one JSON object on stdout instead of the table" },
    format: choice("FORMAT", ["table", "json", "prometheus"], "table, json or prometheus (text exposition format)", {
      fallback: "table",
    }),
    textfile: text(
      "PATH",
      "with --format prometheus: write to PATH atomically instead of stdout, for the node_exporter textfile collector (PATH should end in .prom)",
    ),
    "max-duplicate-rate": text(
      "R",
      "exit 1 when the window's duplicate rate is above R (a fraction such as 0.05, or a percentage such as 5%)",
    ),
  },
  exitCodes: [0, 1, 2, 3],
  examples: [
    { args: "--root /srv/spool/orders --window 1h", does: "the ledger's counts, all time and over the last hour" },
    {
      args: "--root /srv/spool/orders --format prometheus --textfile /var/lib/node_exporter/textfile/spool.prom",
      does: "write the metrics for node_exporter",
    },
    {
      args: "--root /srv/spool/orders --window 1h --max-duplicate-rate 5% -q",
      does: "exit 1, saying why, when more than 5% were redeliveries",
    },
  ],
} satisfies CommandSpec

/** `bun run stats`: ledger statistics as a table, JSON or metrics; exit 1 above --max-duplicate-rate. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values: v, texts, quiet }) => {
    const windowMs = v.window
    const windowText = texts.window ?? `${windowMs}ms`
    const format = v.json ? "json" : (v.format ?? "table")
    if (v.json && v.format !== undefined && v.format !== "json")
      throw new SpoolError("usage", `--json and --format ${v.format} ask for two formats; give one`)
    if (v.textfile !== undefined && format !== "prometheus")
      throw new SpoolError("usage", "--textfile writes the Prometheus format; add --format prometheus")
    const maxRate = v["max-duplicate-rate"] === undefined ? undefined : parseRate(v["max-duplicate-rate"])
    const queue = openQueue(resolveRoot(v.root))
    const since = new Date(wallClock() - windowMs)
    const url = resolveLedgerUrl(v.ledger)
    const stats = await statsOf(
      queue,
      await openExistingLedger(queue, { url, readonly: true, isLostLedgerRefused: true }),
      since,
    )
    const rate = stats.recent.duplicateRate
    const isOverRate = maxRate !== undefined && rate !== null && rate > maxRate
    if (format === "json") {
      const out = {
        root: queue.root,
        window: { text: windowText, ms: windowMs },
        ...stats,
        failuresByClass: { allTime: byClass(stats.allTime), recent: byClass(stats.recent) },
        ...(maxRate !== undefined && { maxDuplicateRate: maxRate, ok: !isOverRate }),
      }
      if (!quiet) process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
    } else if (format === "prometheus") {
      const metrics = statsMetrics(stats, queue.root, windowText)
      if (v.textfile !== undefined) writeTextfile(v.textfile, metrics)
      else if (!quiet) process.stdout.write(metrics)
    } else if (!quiet) {
      process.stdout.write(formatStats(stats, url === undefined ? queue.ledger : redact(url), windowText))
    }
    if (isOverRate)
      process.stderr.write(
        `stats: duplicate rate ${percent(rate)} over the last ${windowText} is above --max-duplicate-rate ${percent(maxRate)}\n`,
      )
    return isOverRate ? ExitCode.check : ExitCode.ok
  })
}

/** A rate limit as a fraction: `0.05` or `5%`. */
function parseRate(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(%?)$/.exec(text.trim())
  const r = m ? Number(m[1]) / (m[2] ? 100 : 1) : Number.NaN
  if (!(r >= 0 && r <= 1))
    throw new SpoolError(
      "usage",
      `--max-duplicate-rate takes a fraction from 0 to 1 (0.05) or a percentage (5%), not ${JSON.stringify(text)}`,
    )
  return r
}

function percent(r: number): string {
  return `${(r * 100).toFixed(1)}%`
}

/** Failures of a period by class. */
export function byClass(p: StatsPeriod): Record<ErrorClass, number> {
  const out: Record<ErrorClass, number> = { format: 0, business: 0 }
  for (const [reason, n] of Object.entries(p.failuresByReason)) out[classOf(reason)] += n
  return out
}

/**
 * The ledger's statistics, closing it; zeros where there is no ledger yet. The open failures are
 * the files in error/ by reason, not the ledger's open rows: a file removed by hand is not open.
 */
export async function statsOf(queue: Queue, ledger: LedgerPort | undefined, since: Date): Promise<Stats> {
  if (ledger === undefined)
    return { ...emptyStats(since), openFailures: openFailuresIn(queue, new Map()), deferrals: { deferred: 0, due: 0 } }
  try {
    const stats = await ledger.stats(since)
    return {
      ...stats,
      openFailures: openFailuresIn(queue, await ledger.failureReasons()),
      deferrals: await ledger.deferralCounts(new Date(wallClock()).toISOString()),
    }
  } finally {
    await ledger.close()
  }
}

/** The ledger's statistics and its transient failures waiting in deferred/ now (`due`: their next attempt has come). */
export interface Stats extends LedgerStats {
  readonly deferrals: { readonly deferred: number; readonly due: number }
}

/** The human table of `bun run stats`. */
export function formatStats(stats: Stats, ledgerPath: string, windowText: string): string {
  const a = stats.allTime
  const r = stats.recent
  const rows: [string, string, string][] = [
    ["", "all time", `last ${windowText}`],
    ["processed", count(a.processed), count(r.processed)],
    ["duplicates", count(a.duplicates), count(r.duplicates)],
    ["duplicate rate", rate(a), rate(r)],
    ["conflicts", count(a.conflicts), count(r.conflicts)],
    ["failures", count(a.failures), count(r.failures)],
    ["  format errors", count(byClass(a).format), count(byClass(r).format)],
    ["  business errors", count(byClass(a).business), count(byClass(r).business)],
    ...Object.keys(a.failuresByReason).map((reason): [string, string, string] => [
      `  ${reason} (${classOf(reason)})`,
      count(a.failuresByReason[reason] ?? 0),
      count(r.failuresByReason[reason] ?? 0),
    ]),
    ["poison", count(a.poison), count(r.poison)],
    ["replays", count(a.replays), count(r.replays)],
  ]
  const w0 = Math.max(...rows.map((x) => x[0].length))
  const w1 = Math.max(...rows.map((x) => x[1].length))
  const w2 = Math.max(...rows.map((x) => x[2].length))
  const table = rows.map(([l, x, y]) => `${l.padEnd(w0)}  ${x.padStart(w1)}  ${y.padStart(w2)}`.trimEnd())
  const open = Object.entries(stats.openFailures)
    .map(([reason, n]) => `${reason} ${n}`)
    .join(", ")
  return [
    `spool stats for ${ledgerPath}`,
    "",
    ...table,
    "",
    `distinct duplicate msg_ids: ${stats.duplicateIds}`,
    `failures in error/: ${open || "none"}`,
    `deferred now: ${stats.deferrals.deferred} (${stats.deferrals.due} due)`,
    `last processed: ${stats.lastProcessedAt ?? "never"}`,
    "",
  ].join("\n")
}

function count(n: number): string {
  return String(n)
}

function rate(p: StatsPeriod): string {
  return p.duplicateRate === null ? "-" : `${(p.duplicateRate * 100).toFixed(1)}%`
}
