import { type CommandSpec, choice, duration, flag, json, root, runCommand, text } from "@spool/cli"
import { ExitCode, escapeLabel, formatNumber, SpoolError, writeTextfile } from "@spool/core/engine"
import { writeErr, writeOut } from "./_io.ts"
import { lagTarget } from "./lag/args.ts"
import { formatHistogram, histogramJson } from "./lag/histogram.ts"
import { isStalled, type LagLimits, lagViolations } from "./lag/limits.ts"
import { type LagDetail, type LagReport, measureLag } from "./lag/measure.ts"
import {
  formatPlugin,
  formatUnknown,
  isPluginMode,
  judgePlugin,
  type PluginLimits,
  PluginStatus,
  pluginOptions,
  type RangedDir,
  rangedDirs,
} from "./lag/plugin.ts"
import { parseRange } from "./lag/range.ts"

export type { Histogram } from "./lag/histogram.ts"
export { bucketOf, formatHistogram, histogramEdgesMinutes } from "./lag/histogram.ts"
export type { LagLimits } from "./lag/limits.ts"
export { isStalled, lagViolations } from "./lag/limits.ts"
export type { AgeClock, DirScan, LagDetail, LagReport } from "./lag/measure.ts"
export { measureLag, scanQueueDir, waitingDirs } from "./lag/measure.ts"
export type { CountRanges, PluginLimits, PluginVerdict } from "./lag/plugin.ts"
export { formatPlugin, isPluginMode, judgePlugin, PluginStatus } from "./lag/plugin.ts"
export type { NagiosRange } from "./lag/range.ts"
export { isAlert, parseRange } from "./lag/range.ts"

/** The output formats of lag. */
export type LagFormat = "line" | "json" | "prometheus"

const formats = ["line", "json", "prometheus"] as const satisfies readonly LagFormat[]

/** The default output, exactly as docs/monitoring.md specifies it; ` stalled` ends it when the queue is. */
export function formatLine(r: LagReport, stalled = false): string {
  return `inbox=${r.inbox} processing=${r.processing} error=${r.error}${stalled ? " stalled" : ""}\n`
}

/** The `--all` line: the default fields, then done, the ages in whole seconds, ignored, the idle time and deferred. */
export function formatLongLine(r: LagReport, stalled = false): string {
  return `inbox=${r.inbox} processing=${r.processing} error=${r.error} done=${r.done} oldest_inbox_age_seconds=${Math.floor(r.oldestInboxAgeSeconds)} oldest_processing_age_seconds=${Math.floor(r.oldestProcessingAgeSeconds)} ignored=${r.ignored} idle_seconds=${Math.floor(r.idleSeconds)} deferred=${r.deferred}${stalled ? " stalled" : ""}\n`
}

/** One JSON object on one line. */
export function formatJson(r: LagReport, limits: LagLimits, violations: readonly string[]): string {
  return `${JSON.stringify({
    root: r.root,
    inbox: r.inbox,
    processing: r.processing,
    error: r.error,
    done: r.done,
    deferred: r.deferred,
    ignored: r.ignored,
    oldest_inbox_age_seconds: round3(r.oldestInboxAgeSeconds),
    oldest_processing_age_seconds: round3(r.oldestProcessingAgeSeconds),
    idle_seconds: round3(r.idleSeconds),
    threshold: limits.threshold ?? null,
    max_age_seconds: limits.maxAgeSeconds ?? null,
    stalled_after_seconds: limits.stalledAfterSeconds ?? null,
    stalled: isStalled(r, limits.stalledAfterSeconds),
    ok: violations.length === 0,
    violations,
    ...(r.histogram === undefined ? {} : { histogram: histogramJson(r.histogram) }),
  })}\n`
}

/**
 * The Prometheus text exposition format (version 0.0.4), as the node_exporter textfile
 * collector reads it. Every series carries the queue root as a label so one node can watch
 * several queues from several files.
 */
export function formatPrometheus(r: LagReport, limits: LagLimits, violations: readonly string[]): string {
  const root = `root="${escapeLabel(r.root)}"`
  const lines: string[] = []
  const metric = (name: string, help: string, samples: readonly [string, number][]) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`)
    for (const [labels, value] of samples) lines.push(`${name}{${labels}} ${formatNumber(value)}`)
  }
  metric(
    "spool_messages",
    "Regular files directly in each queue directory; in inbox, only the names consume takes.",
    (["inbox", "processing", "error", "done", "deferred"] as const).map((d) => [`${root},dir="${d}"`, r[d]]),
  )
  metric(
    "spool_ignored_files",
    "Regular files in inbox that consume leaves: hidden names, names not ending in .json.",
    [[`${root},dir="inbox"`, r.ignored]],
  )
  metric(
    "spool_oldest_message_age_seconds",
    "Seconds the oldest file has waited: inbox since written (mtime), processing since claimed (ctime); 0 when empty.",
    [
      [`${root},dir="inbox"`, round3(r.oldestInboxAgeSeconds)],
      [`${root},dir="processing"`, round3(r.oldestProcessingAgeSeconds)],
    ],
  )
  metric("spool_idle_seconds", "Seconds since a file last entered or left done or error (their directories' mtime).", [
    [root, round3(r.idleSeconds)],
  ])
  if (limits.threshold !== undefined)
    metric("spool_lag_threshold", "The inbox size above which lag exits 1.", [[root, limits.threshold]])
  if (limits.maxAgeSeconds !== undefined)
    metric("spool_lag_max_age_seconds", "The inbox age above which lag exits 1.", [[root, limits.maxAgeSeconds]])
  if (limits.stalledAfterSeconds !== undefined) {
    metric("spool_lag_stalled_after_seconds", "The idle time after which a queue with waiting files is stalled.", [
      [root, limits.stalledAfterSeconds],
    ])
    metric("spool_lag_stalled", "1 when files wait and nothing has finished for --stalled-after, else 0.", [
      [root, isStalled(r, limits.stalledAfterSeconds) ? 1 : 0],
    ])
  }
  metric("spool_lag_ok", "1 when the last lag check passed, 0 when it exited 1.", [
    [root, violations.length === 0 ? 1 : 0],
  ])
  return `${lines.join("\n")}\n`
}

function round3(n: number): number {
  return Math.round(n * 1000) / 1000
}

/** THRESHOLD: a whole number, written plainly (no sign, no exponent, no spaces). */
export function parseThreshold(text: string | undefined): number {
  if (text === undefined) throw new SpoolError("usage", "missing THRESHOLD (the inbox size above which lag exits 1)")
  if (/^-[0-9]/.test(text))
    throw new SpoolError("usage", `THRESHOLD must be a whole number >= 0, not the negative number ${text}`)
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(Number(text)))
    throw new SpoolError("usage", `THRESHOLD must be a whole number >= 0, not ${JSON.stringify(text)}`)
  return Number(text)
}

/** `lag`'s options and help. */
export const spec = {
  name: "lag",
  usage:
    "lag.sh [DIR] THRESHOLD [--root DIR] [--all | --json | --format line|json|prometheus] [--textfile PATH] [--max-age AGE] [--stalled-after DURATION] [--histogram]\n" +
    "       lag.sh [DIR] [--root DIR] [--warning RANGE] [--critical RANGE] [--warning-error RANGE] [--critical-error RANGE] [--warning-deferred RANGE] [--critical-deferred RANGE] [--warning-age DURATION] [--critical-age DURATION] [--stalled-after DURATION]",
  summary: "How far behind a queue is: files per directory; exit 1 over THRESHOLD, --max-age or stalled.",
  description:
    "By default prints exactly one line\n" +
    "  inbox=<n> processing=<n> error=<n>\n" +
    "counting the regular files directly in each directory (in inbox/, only the names consume takes:\n" +
    "hidden names and names not ending in .json are counted apart as ignored), and exits 1 when inbox\n" +
    "holds more than THRESHOLD files, when --max-age is crossed, or when the queue is stalled (the\n" +
    "line then ends in ` stalled`). An inbox/ age is the time since the file was written (mtime); a\n" +
    "processing/ age, since it was claimed (ctime). Stalled: files wait in inbox/ or processing/,\n" +
    "the oldest for longer than --stalled-after, and nothing entered done/ or error/ for as long.\n" +
    "--histogram prints the ages of inbox/, processing/, error/ and deferred/ in buckets of minutes, as qshape\n" +
    "(THRESHOLD is then optional). The root is DIR, else --root, $SPOOL_ROOT, the enclosing queue root\n" +
    "or ./spool, as for every command; a lone whole number is THRESHOLD. A --textfile written is exit 0:\n" +
    "the verdict is in the metrics (spool_lag_ok). With any --warning* or --critical* option lag is a\n" +
    "Nagios/Icinga plugin: one line `SPOOL OK - ... | perfdata`, exit 0 OK, 1 WARNING, 2 CRITICAL (also\n" +
    "when stalled), 3 UNKNOWN for bad arguments, a root that is not a queue or cannot be read. A RANGE\n" +
    "is a Nagios range: 10 alerts above 10, 10: below 10, ~:10 above 10, 10:20 outside 10..20, @10:20 inside.",
  arguments: [
    { name: "DIR", help: "queue root holding inbox/ processing/ done/ error/ (default: as --root)" },
    { name: "THRESHOLD", help: "whole number; exit 1 when inbox holds more files than this (not in plugin mode)" },
  ],
  options: {
    root,
    all: flag("add done, the oldest ages in inbox/ and processing/, ignored, the idle time and deferred to the line"),
    json: { ...json, help: "one JSON object (counts, ages in seconds, limits, stalled, ok, violations)" },
    format: choice("FORMAT", formats, "line, json or prometheus (text exposition format)", { fallback: "line" }),
    textfile: text(
      "PATH",
      "with --format prometheus: write to PATH atomically instead of stdout, for the node_exporter textfile collector (PATH should end in .prom)",
    ),
    "max-age": {
      ...duration("also exit 1 when the oldest inbox file is older than AGE (30s, 5m, 2h)", { example: "5m" }),
      value: "AGE",
    },
    "stalled-after": duration(
      "stalled when files wait and nothing entered done/ or error/ for this long: exit 1 (plugin: CRITICAL)",
      { example: "10m", min: 1 },
    ),
    histogram: flag("print the age histogram of inbox/, processing/, error/ and deferred/ (minutes, as qshape)"),
    warning: text("RANGE", "plugin: WARNING when the inbox/ file count alerts for RANGE (10: more than 10)"),
    critical: text("RANGE", "plugin: CRITICAL when the inbox/ file count alerts for RANGE"),
    "warning-error": text("RANGE", "plugin: WARNING when the error/ file count alerts for RANGE"),
    "critical-error": text("RANGE", "plugin: CRITICAL when the error/ file count alerts for RANGE"),
    "warning-deferred": text("RANGE", "plugin: WARNING when the deferred/ file count alerts for RANGE"),
    "critical-deferred": text("RANGE", "plugin: CRITICAL when the deferred/ file count alerts for RANGE"),
    "warning-age": duration("plugin: WARNING when the oldest inbox file is older than this", { example: "5m" }),
    "critical-age": duration("plugin: CRITICAL when the oldest inbox file is older than this", { example: "15m" }),
  },
  exitCodes: [0, 1, 2, 3],
  examples: [
    {
      args: "/srv/spool/orders 1000 --max-age 5m",
      does: "the counts; exit 1 above 1000 waiting files or a 5-minute-old one",
    },
    {
      args: "/srv/spool/orders 1000 --format prometheus --textfile /var/lib/node_exporter/textfile/spool.prom",
      does: "write the metrics for node_exporter (exit 0 once written)",
    },
    {
      args: "/srv/spool/orders --warning 1000 --critical 5000 --critical-error 0",
      does: "a Nagios plugin: CRITICAL at the first failure in error/",
    },
  ],
} satisfies CommandSpec

type Values = Parameters<Parameters<typeof runCommand<typeof spec.options>>[2]>[0]

/** `lag DIR THRESHOLD`: queue depth for cron and dashboards; `lag DIR --warning N ...`: a Nagios plugin. */
export async function main(argv: readonly string[]): Promise<number> {
  if (isPluginMode(argv))
    return runCommand(spec, argv, runPlugin, {
      onFailure: async (message) => {
        await writeOut(formatUnknown(message))
        return PluginStatus.UNKNOWN
      },
    })
  return runCommand(spec, argv, runCheck)
}

const seconds = (ms: number | undefined) => (ms === undefined ? undefined : ms / 1000)

async function runCheck({ values, positionals, quiet }: Values): Promise<number> {
  const target = lagTarget(values.root, positionals, false)
  const thresholdText = target.threshold
  const threshold = thresholdText === undefined && values.histogram === true ? undefined : parseThreshold(thresholdText)
  const format = chooseFormat(values.format, values.json)
  if (values.textfile !== undefined && format !== "prometheus")
    throw new SpoolError("usage", "--textfile writes the Prometheus format; add --format prometheus")
  if (values.all === true && format !== "line")
    throw new SpoolError("usage", "--all extends the one-line format; --json and prometheus always have every field")
  if (values.histogram === true && (format === "prometheus" || values.all === true))
    throw new SpoolError("usage", "--histogram prints a table or, with --json, a field; not with --all or prometheus")
  const limits: LagLimits = {
    threshold,
    maxAgeSeconds: seconds(values["max-age"]),
    stalledAfterSeconds: seconds(values["stalled-after"]),
  }
  const queue = target.queue
  const isDated = limits.maxAgeSeconds !== undefined || limits.stalledAfterSeconds !== undefined
  const detail: LagDetail = format !== "line" || values.all === true ? "full" : isDated ? "ages" : "counts"
  const report = measureLag(queue, detail, Date.now(), { histogram: values.histogram })
  const violations = lagViolations(report, limits)
  const stalled = isStalled(report, limits.stalledAfterSeconds)
  if (format === "prometheus" && values.textfile !== undefined) {
    // The file is the report, spool_lag_ok its verdict: a cron line that wrote it succeeded and
    // says nothing, so a backlog does not mail every minute.
    writeTextfile(values.textfile, formatPrometheus(report, limits, violations))
    return ExitCode.ok
  }
  if (quiet && violations.length === 0) return ExitCode.ok
  if (format === "json") await writeOut(formatJson(report, limits, violations))
  else if (format === "prometheus") await writeOut(formatPrometheus(report, limits, violations))
  else if (report.histogram !== undefined) await writeOut(formatHistogram(report.histogram))
  else if (!quiet) await writeOut(values.all === true ? formatLongLine(report, stalled) : formatLine(report, stalled))
  if (violations.length > 0) await writeErr(violations.map((v) => `lag: ${v}\n`).join(""))
  return violations.length === 0 ? ExitCode.ok : ExitCode.check
}

const rangeOptions = {
  inbox: ["warning", "critical"],
  error: ["warning-error", "critical-error"],
  deferred: ["warning-deferred", "critical-deferred"],
} as const satisfies Record<RangedDir, readonly [string, string]>

async function runPlugin({ values, positionals, quiet }: Values): Promise<number> {
  if (quiet) throw new SpoolError("usage", "-q does not go with a plugin: its one line is what Nagios reads; drop it")
  for (const other of ["all", "json", "histogram"] as const)
    if (values[other] === true) throw new SpoolError("usage", `--${other} is not a plugin's output; drop it`)
  for (const other of ["format", "textfile", "max-age"] as const)
    if (values[other] !== undefined)
      throw new SpoolError(
        "usage",
        `--${other} does not go with ${pluginOptions.map((o) => `--${o}`).join(", ")}${other === "max-age" ? "; use --warning-age or --critical-age" : ""}`,
      )
  const ranges = (dir: RangedDir) => {
    const [w, c] = rangeOptions[dir]
    return {
      warning: values[w] === undefined ? undefined : parseRange(w, values[w]),
      critical: values[c] === undefined ? undefined : parseRange(c, values[c]),
    }
  }
  const counts = Object.fromEntries(rangedDirs.map((d) => [d, ranges(d)]))
  const { warning, critical } = counts.inbox ?? {}
  // Two plain limits (`--warning 5 --critical 2`) the wrong way round are a typo, not a range.
  if (
    warning?.start === 0 &&
    critical?.start === 0 &&
    !warning.isInside &&
    !critical.isInside &&
    critical.end < warning.end
  )
    throw new SpoolError("usage", `--critical ${critical.text} is below --warning ${warning.text}`)
  const limits: PluginLimits = {
    counts,
    warningAgeSeconds: seconds(values["warning-age"]),
    criticalAgeSeconds: seconds(values["critical-age"]),
    stalledAfterSeconds: seconds(values["stalled-after"]),
  }
  const wa = limits.warningAgeSeconds
  const ca = limits.criticalAgeSeconds
  if (wa !== undefined && ca !== undefined && ca < wa)
    throw new SpoolError("usage", "--critical-age is shorter than --warning-age")
  const report = measureLag(lagTarget(values.root, positionals, true).queue, "ages")
  const verdict = judgePlugin(report, limits)
  await writeOut(formatPlugin(report, limits, verdict))
  return PluginStatus[verdict.state]
}

function chooseFormat(format: LagFormat | undefined, isJson: boolean): LagFormat {
  if (isJson && format !== undefined && format !== "json")
    throw new SpoolError("usage", `--json and --format ${format} contradict each other`)
  return isJson ? "json" : (format ?? "line")
}
