// `stats --format prometheus`: the ledger's counts as metrics, for a scrape or the
// node_exporter textfile collector, and the windowed duplicate rate to alert on.
import { classOf, Exposition } from "@spool/core/engine"
import type { Stats } from "./stats.ts"

/**
 * The metrics of one root's ledger. Totals are counters (compact prunes the rows they count,
 * which a counter reads as a reset); the window's figures and the open failures are gauges.
 */
export function statsMetrics(stats: Stats, root: string, windowText: string): string {
  const at = { root }
  const inWindow = { root, window: windowText }
  const byReason = (counts: Readonly<Record<string, number>>, labels: Record<string, string>) =>
    Object.entries(counts).map(
      ([reason, n]) => [{ ...labels, reason, class: reason === "unknown" ? "unknown" : classOf(reason) }, n] as const,
    )
  const a = stats.allTime
  const w = stats.recent
  return new Exposition()
    .counter("spool_processed_total", "Messages recorded for the first time (processed rows).", [[at, a.processed]])
    .counter("spool_duplicates_total", "Later deliveries of a msg_id already processed, conflicts included.", [
      [at, a.duplicates],
    ])
    .counter("spool_conflicts_total", "Duplicates whose content differs from the processed delivery.", [
      [at, a.conflicts],
    ])
    .counter(
      "spool_rejections_total",
      "Files sent to error/, by reason and class (format or business).",
      byReason(a.failuresByReason, at),
    )
    .counter("spool_replays_total", "Files moved from error/ back to inbox/ by replay.", [[at, a.replays]])
    .gauge("spool_window_processed", "Messages processed in the window.", [[inWindow, w.processed]])
    .gauge("spool_window_duplicates", "Duplicates in the window.", [[inWindow, w.duplicates]])
    .gauge("spool_window_conflicts", "Conflicts in the window.", [[inWindow, w.conflicts]])
    .gauge(
      "spool_window_rejections",
      "Rejections in the window, by reason and class.",
      byReason(w.failuresByReason, inWindow),
    )
    .gauge("spool_duplicate_rate", "duplicates / (processed + duplicates) in the window; NaN with no delivery in it.", [
      [inWindow, w.duplicateRate ?? Number.NaN],
    ])
    .gauge(
      "spool_open_failures",
      "The files in error/, by the reason and class of their failure (unknown: none recorded).",
      byReason(stats.openFailures, at),
    )
    .gauge("spool_deferred", "Transient failures waiting in deferred/ for their next attempt.", [
      [at, stats.deferrals.deferred],
    ])
    .gauge("spool_deferred_due", "Deferred files whose next attempt time has come.", [[at, stats.deferrals.due]])
    .gauge(
      "spool_last_processed_timestamp_seconds",
      "When the ledger last recorded a message processed (Unix time); 0 before the first.",
      [[at, stats.lastProcessedAt === null ? 0 : Date.parse(stats.lastProcessedAt) / 1000]],
    )
    .text()
}
