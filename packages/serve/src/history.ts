// The overview's charts: the ledger's history in buckets, read with stats' own query. stats
// counts what happened since a moment; asked at each bucket's start, the differences of those
// counts are what happened within each bucket. One read-only open, a few short reads.
import { type LedgerPort, openExistingLedger, openQueue, type StatsPeriod } from "@spool/core/engine"
import type { Source } from "./read.ts"

/** How many buckets the window is cut into. */
export const historyBuckets = 24

/** Per bucket: its start (seconds since the epoch, as uPlot reads time), and what happened in it. */
export interface History {
  readonly at: number[]
  readonly processed: number[]
  readonly duplicates: number[]
  readonly failures: number[]
  /** duplicates / (processed + duplicates) in the bucket; null with no delivery. */
  readonly duplicateRate: (number | null)[]
}

/** The window's history, `historyBuckets` buckets ending now; zeros where there is no ledger yet. */
export async function readHistory(source: Source, now = Date.now()): Promise<History> {
  const step = Math.max(1, Math.floor(source.windowMs / historyBuckets))
  const starts = Array.from({ length: historyBuckets }, (_, i) => now - (historyBuckets - i) * step)
  const queue = openQueue(source.root)
  const ledger = await openExistingLedger(queue, { url: source.url, readonly: true, isLostLedgerRefused: true })
  try {
    const since = await Promise.all([...starts, now].map((t) => sinceOf(ledger, t)))
    const within = (i: number, f: (p: StatsPeriod) => number) => {
      const [a, b] = [since[i], since[i + 1]]
      return a === undefined || b === undefined ? 0 : f(a) - f(b)
    }
    const history: History = { at: [], processed: [], duplicates: [], failures: [], duplicateRate: [] }
    starts.forEach((t, i) => {
      const processed = within(i, (p) => p.processed)
      const duplicates = within(i, (p) => p.duplicates)
      history.at.push(Math.floor(t / 1000))
      history.processed.push(processed)
      history.duplicates.push(duplicates)
      history.failures.push(within(i, (p) => p.failures))
      history.duplicateRate.push(processed + duplicates === 0 ? null : duplicates / (processed + duplicates))
    })
    return history
  } finally {
    await ledger?.close()
  }
}

/** What the ledger recorded since `t` (the stats query's recent period); nothing without a ledger. */
async function sinceOf(ledger: LedgerPort | undefined, t: number): Promise<StatsPeriod | undefined> {
  return ledger === undefined ? undefined : (await ledger.stats(new Date(t))).recent
}
