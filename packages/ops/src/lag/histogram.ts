// The age histogram of the waiting directories, in the shape Postfix's qshape prints: buckets
// in minutes that double, one row per directory, T the row's total.
import type { waitingDirs } from "./measure.ts"

/** The upper bounds of the age buckets in minutes; a last bucket holds everything older. */
export const histogramEdgesMinutes = [5, 10, 20, 40, 80, 160, 320, 640, 1280] as const

/** Files per age bucket for each waiting directory (histogramEdgesMinutes.length + 1 counts). */
export type Histogram = { readonly [D in (typeof waitingDirs)[number]["dir"]]: readonly number[] }

/** The bucket of an age in ms: the first whose bound it is under, else the last (a future date is age 0). */
export function bucketOf(ageMs: number): number {
  const minutes = Math.max(0, ageMs) / 60_000
  const i = histogramEdgesMinutes.findIndex((edge) => minutes < edge)
  return i === -1 ? histogramEdgesMinutes.length : i
}

/** The column heads: T, each bound, and the last bound with a `+`. */
export function histogramHeads(): string[] {
  const last = histogramEdgesMinutes[histogramEdgesMinutes.length - 1]
  return ["T", ...histogramEdgesMinutes.map(String), `${last}+`]
}

/** The histogram as a right-aligned text table, a header line then one line per directory. */
export function formatHistogram(h: Histogram): string {
  const rows: string[][] = [["", ...histogramHeads()]]
  for (const [dir, counts] of Object.entries(h) as [string, readonly number[]][])
    rows.push([dir, String(counts.reduce((a, b) => a + b, 0)), ...counts.map(String)])
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? []
  return rows
    .map((r) => r.map((cell, i) => cell.padStart(widths[i] ?? 0)).join(" "))
    .join("\n")
    .concat("\n")
}

/** The histogram for --json: the bounds, then each directory's total and counts (the last past the bounds). */
export function histogramJson(h: Histogram): Record<string, unknown> {
  const out: Record<string, unknown> = { bucket_minutes: [...histogramEdgesMinutes] }
  for (const [dir, counts] of Object.entries(h) as [string, readonly number[]][])
    out[dir] = { total: counts.reduce((a, b) => a + b, 0), counts: [...counts] }
  return out
}
