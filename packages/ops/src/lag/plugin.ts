// lag as a Nagios/Icinga plugin: one status line, performance data after `|` as the Nagios
// plugin guidelines define it ('label'=value[UOM];[warn];[crit];[min];[max]), and the four
// plugin exit codes.

import { formatSeconds, isStalled, stalledPhrase } from "./limits.ts"
import type { LagReport } from "./measure.ts"
import { alertPhrase, isAlert, type NagiosRange } from "./range.ts"

/** The plugin exit codes every Nagios-compatible monitor reads. */
export const PluginStatus = { OK: 0, WARNING: 1, CRITICAL: 2, UNKNOWN: 3 } as const
export type PluginState = keyof typeof PluginStatus

/** The options that make lag a plugin; any one of them is enough. */
export const pluginOptions = [
  "warning",
  "critical",
  "warning-error",
  "critical-error",
  "warning-deferred",
  "critical-deferred",
  "warning-age",
  "critical-age",
] as const

/** The directories whose file counts have plugin thresholds. */
export const rangedDirs = ["inbox", "error", "deferred"] as const
export type RangedDir = (typeof rangedDirs)[number]

/** Whether `argv` asks for plugin mode, judged before parsing so that even a bad argument is reported as UNKNOWN. */
export function isPluginMode(argv: readonly string[]): boolean {
  for (const a of argv) {
    if (a === "--") return false
    if (pluginOptions.some((o) => a === `--${o}` || a.startsWith(`--${o}=`))) return true
  }
  return false
}

/** A directory's two ranges: its file count is WARNING or CRITICAL when it alerts for them. */
export interface CountRanges {
  readonly warning?: NagiosRange | undefined
  readonly critical?: NagiosRange | undefined
}

/** The plugin's limits: ranges for the counts of inbox/, error/ and deferred/, ages and the stall time in seconds. */
export interface PluginLimits {
  readonly counts: Readonly<Partial<Record<RangedDir, CountRanges>>>
  readonly warningAgeSeconds: number | undefined
  readonly criticalAgeSeconds: number | undefined
  readonly stalledAfterSeconds: number | undefined
}

/** A plugin verdict: the state and why, the critical reasons first. */
export interface PluginVerdict {
  readonly state: Exclude<PluginState, "UNKNOWN">
  readonly reasons: readonly string[]
}

/** Judges a measurement: CRITICAL over a critical limit or stalled, WARNING over a warning limit, else OK. */
export function judgePlugin(r: LagReport, l: PluginLimits): PluginVerdict {
  const critical: string[] = []
  const warning: string[] = []
  if (isStalled(r, l.stalledAfterSeconds)) critical.push(stalledPhrase(r))
  for (const dir of rangedDirs) {
    const { warning: w, critical: c } = l.counts[dir] ?? {}
    const n = r[dir]
    if (c !== undefined && isAlert(c, n)) critical.push(alertPhrase(dir, n, "critical", c))
    else if (w !== undefined && isAlert(w, n)) warning.push(alertPhrase(dir, n, "warning", w))
  }
  const age = r.oldestInboxAgeSeconds
  const old = `the oldest message in inbox/ is ${formatSeconds(age)} old`
  if (l.criticalAgeSeconds !== undefined && age > l.criticalAgeSeconds)
    critical.push(`${old}, over the critical age ${formatSeconds(l.criticalAgeSeconds)}`)
  else if (l.warningAgeSeconds !== undefined && age > l.warningAgeSeconds)
    warning.push(`${old}, over the warning age ${formatSeconds(l.warningAgeSeconds)}`)
  const state = critical.length > 0 ? "CRITICAL" : warning.length > 0 ? "WARNING" : "OK"
  return { state, reasons: [...critical, ...warning] }
}

/** The plugin's output: `SPOOL STATE - [reasons: ]summary | perfdata`, one line. */
export function formatPlugin(r: LagReport, l: PluginLimits, v: PluginVerdict): string {
  const summary = `inbox=${r.inbox} processing=${r.processing} error=${r.error} deferred=${r.deferred} ignored=${r.ignored} oldest=${formatSeconds(r.oldestInboxAgeSeconds)}`
  const text = v.reasons.length > 0 ? `${v.reasons.join("; ")}: ${summary}` : summary
  const perf = [
    perfdata("inbox", r.inbox, "", l.counts.inbox?.warning?.text, l.counts.inbox?.critical?.text),
    perfdata("processing", r.processing, ""),
    perfdata("error", r.error, "", l.counts.error?.warning?.text, l.counts.error?.critical?.text),
    perfdata("ignored", r.ignored, ""),
    perfdata("deferred", r.deferred, "", l.counts.deferred?.warning?.text, l.counts.deferred?.critical?.text),
    perfdata("oldest", Math.floor(r.oldestInboxAgeSeconds), "s", l.warningAgeSeconds, l.criticalAgeSeconds),
    perfdata("oldest_processing", Math.floor(r.oldestProcessingAgeSeconds), "s"),
    perfdata("idle", Math.floor(r.idleSeconds), "s"),
  ]
  return `SPOOL ${v.state} - ${text} | ${perf.join(" ")}\n`
}

/** The UNKNOWN line for anything that is not a measurement: a bad argument, not a queue, an unreadable directory. */
export function formatUnknown(message: string): string {
  return `SPOOL UNKNOWN - ${message.replaceAll(/[\r\n|]+/g, " ").trim()}\n`
}

/** One performance value: label=value[UOM];warn;crit;min (every value here is at least 0); warn and crit in range format. */
function perfdata(label: string, value: number, unit: string, warn?: number | string, crit?: number | string): string {
  return `${label}=${value}${unit};${warn ?? ""};${crit ?? ""};0`
}
