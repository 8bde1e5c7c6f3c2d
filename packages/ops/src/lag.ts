import fs from "node:fs"
import { join, resolve } from "node:path"
import { type CommandSpec, choice, duration, flag, json, runCommand, text } from "@spool/cli"
import {
  countFiles,
  ExitCode,
  errnoOf,
  openQueue,
  type Queue,
  SpoolError,
  scanDir,
  writeFileAtomic,
} from "@spool/core/engine"
import { writeErr, writeOut } from "./_io.ts"

/** How far behind a queue is: regular files per directory and the age of the oldest waiting ones. */
export interface LagReport {
  readonly root: string
  readonly inbox: number
  readonly processing: number
  readonly error: number
  readonly done: number
  /** Seconds since the oldest file in inbox/ was written (its mtime); 0 when inbox/ is empty. */
  readonly oldestInboxAgeSeconds: number
  /** Seconds since the oldest file in processing/ was claimed (its ctime); 0 when it is empty. */
  readonly oldestProcessingAgeSeconds: number
}

/** The output formats of lag. */
export type LagFormat = "line" | "json" | "prometheus"

const formats = ["line", "json", "prometheus"] as const satisfies readonly LagFormat[]

interface DirScan {
  readonly count: number
  /** The smallest timestamp among the regular files, in ms since the epoch. */
  readonly oldestMs: number | undefined
}

/**
 * Which timestamp dates a file: `mtime`, when its producer wrote it (kept by every rename, so
 * inbox/ age is the delay since the message was produced); `ctime`, which rename(2) sets on
 * Linux filesystems, so in processing/ it is the moment a consumer claimed the file.
 */
export type AgeClock = "mtime" | "ctime"

/**
 * Counts the regular files directly in `path` and finds the oldest timestamp, streaming the
 * directory so memory stays flat at any size. A file that vanishes between readdir and
 * lstat (a consumer claimed it) is not counted.
 */
export function scanAges(path: string, clock: AgeClock): DirScan {
  let count = 0
  let oldest: number | undefined
  for (const e of scanDir(path, 1024)) {
    if (!e.isFile() && isKnownType(e)) continue
    let st: fs.Stats
    try {
      st = fs.lstatSync(join(path, e.name))
    } catch (error) {
      if (errnoOf(error) === "ENOENT") continue
      throw new SpoolError("io", `cannot read ${join(path, e.name)}: ${String(error)}`, { cause: error })
    }
    if (!st.isFile()) continue
    count++
    const t = clock === "mtime" ? st.mtimeMs : st.ctimeMs
    if (oldest === undefined || t < oldest) oldest = t
  }
  return { count, oldestMs: oldest }
}

/** False when readdir could not tell the type (DT_UNKNOWN on some filesystems): lstat decides. */
function isKnownType(e: fs.Dirent): boolean {
  return (
    e.isFile() ||
    e.isDirectory() ||
    e.isSymbolicLink() ||
    e.isFIFO() ||
    e.isSocket() ||
    e.isBlockDevice() ||
    e.isCharacterDevice()
  )
}

/**
 * How much to measure: `counts` is one readdir per directory; `ages` adds an lstat per file
 * in inbox/ and processing/; `full` also counts done/, which grows without bound.
 */
export type LagDetail = "counts" | "ages" | "full"

/** Measures a queue; what a level leaves out is reported as 0. */
export function measureLag(queue: Queue, detail: LagDetail, now = Date.now()): LagReport {
  const count = (d: string) => {
    try {
      return countFiles(d)
    } catch (error) {
      throw new SpoolError("io", `cannot read ${d}: ${String(error)}`, { cause: error })
    }
  }
  const age = (s: DirScan) => (s.oldestMs === undefined ? 0 : Math.max(0, now - s.oldestMs) / 1000)
  const inbox =
    detail === "counts" ? { count: count(queue.inbox), oldestMs: undefined } : scanAges(queue.inbox, "mtime")
  const processing =
    detail === "counts" ? { count: count(queue.processing), oldestMs: undefined } : scanAges(queue.processing, "ctime")
  return {
    root: queue.root,
    inbox: inbox.count,
    processing: processing.count,
    error: count(queue.error),
    done: detail === "full" ? count(queue.done) : 0,
    oldestInboxAgeSeconds: age(inbox),
    oldestProcessingAgeSeconds: age(processing),
  }
}

/** The thresholds a lag check compares against. */
export interface LagLimits {
  readonly threshold: number
  /** In seconds; undefined when no --max-age was given. */
  readonly maxAgeSeconds: number | undefined
}

/** Why a lag check failed, one phrase per limit crossed; empty when it passed. */
export function lagViolations(report: LagReport, limits: LagLimits): string[] {
  const out: string[] = []
  if (report.inbox > limits.threshold) out.push(`inbox=${report.inbox} is over the threshold ${limits.threshold}`)
  if (limits.maxAgeSeconds !== undefined && report.oldestInboxAgeSeconds > limits.maxAgeSeconds)
    out.push(
      `the oldest message in inbox/ is ${formatSeconds(report.oldestInboxAgeSeconds)} old, over --max-age ${formatSeconds(limits.maxAgeSeconds)}`,
    )
  return out
}

/** The default output, exactly as README.md specifies it. */
export function formatLine(r: LagReport): string {
  return `inbox=${r.inbox} processing=${r.processing} error=${r.error}\n`
}

/** The `--all` line: the default fields, then done and the ages in whole seconds. */
export function formatLongLine(r: LagReport): string {
  return `inbox=${r.inbox} processing=${r.processing} error=${r.error} done=${r.done} oldest_inbox_age_seconds=${Math.floor(r.oldestInboxAgeSeconds)} oldest_processing_age_seconds=${Math.floor(r.oldestProcessingAgeSeconds)}\n`
}

/** One JSON object on one line. */
export function formatJson(r: LagReport, limits: LagLimits, violations: readonly string[]): string {
  return `${JSON.stringify({
    root: r.root,
    inbox: r.inbox,
    processing: r.processing,
    error: r.error,
    done: r.done,
    oldest_inbox_age_seconds: round3(r.oldestInboxAgeSeconds),
    oldest_processing_age_seconds: round3(r.oldestProcessingAgeSeconds),
    threshold: limits.threshold,
    max_age_seconds: limits.maxAgeSeconds ?? null,
    ok: violations.length === 0,
    violations,
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
    "Regular files directly in each queue directory.",
    (["inbox", "processing", "error", "done"] as const).map((d) => [`${root},dir="${d}"`, r[d]]),
  )
  metric(
    "spool_oldest_message_age_seconds",
    "Seconds the oldest file has waited: inbox since written (mtime), processing since claimed (ctime); 0 when empty.",
    [
      [`${root},dir="inbox"`, round3(r.oldestInboxAgeSeconds)],
      [`${root},dir="processing"`, round3(r.oldestProcessingAgeSeconds)],
    ],
  )
  metric("spool_lag_threshold", "The inbox size above which lag exits 1.", [[root, limits.threshold]])
  if (limits.maxAgeSeconds !== undefined)
    metric("spool_lag_max_age_seconds", "The inbox age above which lag exits 1.", [[root, limits.maxAgeSeconds]])
  metric("spool_lag_ok", "1 when the last lag check passed, 0 when it exited 1.", [
    [root, violations.length === 0 ? 1 : 0],
  ])
  return `${lines.join("\n")}\n`
}

function escapeLabel(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n")
}

function formatNumber(n: number): string {
  return Number.isFinite(n) ? String(n) : n > 0 ? "+Inf" : n < 0 ? "-Inf" : "NaN"
}

function round3(n: number): number {
  return Math.round(n * 1000) / 1000
}

function formatSeconds(s: number): string {
  return s < 120 ? `${Math.floor(s)}s` : s < 7200 ? `${Math.floor(s / 60)}m` : `${Math.floor(s / 3600)}h`
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
  usage: "lag.sh DIR THRESHOLD [--all | --json | --format line|json|prometheus] [--textfile PATH] [--max-age AGE]",
  summary: "How far behind a queue is: files per directory; exit 1 over THRESHOLD or --max-age.",
  description:
    "By default prints exactly one line\n" +
    "  inbox=<n> processing=<n> error=<n>\n" +
    "counting the regular files directly in each directory, and exits 1 when inbox holds more than\n" +
    "THRESHOLD files (or, with --max-age, when its oldest file is older than AGE). An inbox/ age is\n" +
    "the time since the file was written (mtime); a processing/ age, since it was claimed (ctime).",
  arguments: [
    { name: "DIR", help: "queue root holding inbox/ processing/ done/ error/" },
    { name: "THRESHOLD", help: "whole number; exit 1 when inbox holds more files than this" },
  ],
  options: {
    all: flag("add done=<n> and the oldest ages in inbox/ and processing/ to the line"),
    json: { ...json, help: "one JSON object (counts, ages in seconds, limits, ok, violations)" },
    format: choice("FORMAT", formats, "line, json or prometheus (text exposition format)", { fallback: "line" }),
    textfile: text(
      "PATH",
      "with --format prometheus: write to PATH atomically instead of stdout, for the node_exporter textfile collector (PATH should end in .prom)",
    ),
    "max-age": {
      ...duration("also exit 1 when the oldest inbox file is older than AGE (30s, 5m, 2h)", { example: "5m" }),
      value: "AGE",
    },
  },
} satisfies CommandSpec

/** `lag DIR THRESHOLD`: queue depth for cron and dashboards. Exit 1 over the threshold or age limit. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values, positionals }) => {
    const [dir, thresholdText, ...extra] = positionals
    if (dir === undefined || dir === "") throw new SpoolError("usage", "missing DIR (the queue root)")
    const threshold = parseThreshold(thresholdText)
    if (extra.length > 0) throw new SpoolError("usage", `unexpected argument ${JSON.stringify(extra[0])}`)
    const format = chooseFormat(values.format, values.json)
    if (values.textfile !== undefined && format !== "prometheus")
      throw new SpoolError("usage", "--textfile writes the Prometheus format; add --format prometheus")
    if (values.all === true && format !== "line")
      throw new SpoolError("usage", "--all extends the one-line format; --json and prometheus always have every field")
    const maxAge = values["max-age"]
    const limits: LagLimits = { threshold, maxAgeSeconds: maxAge === undefined ? undefined : maxAge / 1000 }
    const queue = openQueue(resolve(dir))
    const detail: LagDetail =
      format !== "line" || values.all === true ? "full" : limits.maxAgeSeconds !== undefined ? "ages" : "counts"
    const report = measureLag(queue, detail)
    const violations = lagViolations(report, limits)
    if (format === "line") await writeOut(values.all === true ? formatLongLine(report) : formatLine(report))
    else if (format === "json") await writeOut(formatJson(report, limits, violations))
    else {
      const text = formatPrometheus(report, limits, violations)
      if (values.textfile === undefined) await writeOut(text)
      else writeTextfile(values.textfile, text)
    }
    if (violations.length > 0) await writeErr(violations.map((v) => `lag: ${v}\n`).join(""))
    return violations.length === 0 ? ExitCode.ok : ExitCode.check
  })
}

function chooseFormat(format: LagFormat | undefined, isJson: boolean): LagFormat {
  if (isJson && format !== undefined && format !== "json")
    throw new SpoolError("usage", `--json and --format ${format} contradict each other`)
  return isJson ? "json" : (format ?? "line")
}

function writeTextfile(path: string, text: string): void {
  try {
    // node_exporter reads only *.prom files, and writeFileAtomic's temp name does not end in
    // .prom, so the collector never sees a half-written file.
    writeFileAtomic(resolve(path), text)
  } catch (error) {
    if (error instanceof SpoolError) throw error
    throw new SpoolError("io", `cannot write ${path}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    })
  }
}
