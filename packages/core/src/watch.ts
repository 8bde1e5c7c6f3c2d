// Watch mode: drains inbox/ again whenever something may have arrived. `consume --watch` and a
// library consumer's watch() of a directory queue both run it.
import fs from "node:fs"
import { join } from "node:path"
import { wallClock } from "./clock.ts"
import { loadValidator } from "./consume/decide.ts"
import { consume } from "./consume/engine.ts"
import type { ConsumeOptions } from "./consume/options.ts"
import { type ConsumeSummary, emptySummary } from "./consume/summary.ts"
import type { AnyEffect, LedgerPort } from "./ledger/port.ts"
import type { Log } from "./log.ts"
import type { Message } from "./message/decode.ts"
import { isMessageName, type Queue } from "./queue/root.ts"
import { writeReports } from "./report/reports.ts"

/** Settings of a long-running consumer; `E` is its effect's type and `T` its message type, as for consume. */
export interface WatchOptions<E extends AnyEffect = never, T extends Message = Message>
  extends Omit<ConsumeOptions<T, E>, "signal" | "log" | "queue" | "ledger"> {
  readonly queue: Queue
  readonly ledger: LedgerPort<NoInfer<E>>
  readonly log: Log
  /** Stops watching: the batches in hand are finished, nothing more is claimed. */
  readonly signal: AbortSignal
  /** Drain again at least this often even without a file-system event (the safety net). */
  readonly rescanMs: number
  /**
   * After the first event of a burst, wait this long so the burst lands in one drain. 0 (the
   * default) waits for nothing: what arrives while a batch commits is taken in the next, so a
   * trickle is committed at once and a flood in batches that grow with it (group commit).
   */
  readonly batchWindowMs: number
  /** Rewrite dup.txt and error.csv at most this often while files keep arriving. */
  readonly reportIntervalMs?: number
  /** Listen for inotify events on inbox/ (default); off leaves the rescans only, as when events are lost. */
  readonly useEvents?: boolean
  /** Called after every drain that found something to do. */
  readonly onDrain?: (drain: Readonly<ConsumeSummary>, total: Readonly<ConsumeSummary>) => void
}

type Wake = "event" | "timer" | "abort"

/**
 * Consumes inbox/ until stopped: drains it (recovering dead consumers' claims first, as every
 * drain does), then sleeps until a file-system event on inbox/, the rescan timer or the stop
 * signal, and drains again. Events are only a hint that makes the consumer quick: inotify can
 * overflow, and some filesystems (NFS, FUSE) send none, so the rescan timer alone must be
 * enough for correctness. Reports are rewritten after a drain that changed something, at most
 * every `reportIntervalMs` while a burst goes on, and always before returning.
 */
export async function watch<E extends AnyEffect = never, T extends Message = Message>(
  o: WatchOptions<E, T>,
): Promise<ConsumeSummary> {
  const total = emptySummary()
  const wake = new Wakeup()
  const onAbort = () => wake.fire("abort")
  o.signal.addEventListener("abort", onAbort, { once: true })
  await loadValidator(o.type)
  const watcher = o.useEvents === false ? undefined : watchInbox(o.queue.inbox, o.log, () => wake.fire("event"))
  o.log.info("watching", {
    root: o.queue.root,
    events: watcher !== undefined,
    rescan_ms: o.rescanMs,
    batch_window_ms: o.batchWindowMs,
  })
  const reportIntervalMs = o.reportIntervalMs ?? 1000
  const minAgeMs = o.minAgeMs ?? 0
  let isReportDue = false
  let lastReportAt = Number.NEGATIVE_INFINITY
  let woke: Wake = "timer"
  try {
    while (!o.signal.aborted) {
      // Forget earlier wake-ups before scanning: an event from now on is for a file this drain
      // may miss, so it must wake the next wait at once.
      wake.reset()
      const drain = await consume<T, E>({ ...o, signal: o.signal })
      if (drain.claimed + drain.recovered > 0) {
        addTo(total, drain)
        isReportDue = true
        o.onDrain?.(drain, total)
      }
      if (o.signal.aborted) break
      const isBurst = wake.isFired
      if (isReportDue && (!isBurst || performance.now() - lastReportAt >= reportIntervalMs)) {
        await writeReports(o.queue, o.ledger)
        isReportDue = false
        lastReportAt = performance.now()
      }
      // A file left as too young (--min-age) sends no second event: look again once it is old
      // enough, whether its event woke this drain or came before it.
      const timeoutMs = drain.tooYoung > 0 ? Math.min(o.rescanMs, minAgeMs + o.batchWindowMs) : o.rescanMs
      // A deferred file falls due with no event at all: wake when the earliest one does.
      const nextDue = await o.ledger.nextDeferralAt()
      const dueInMs = nextDue === undefined ? Number.POSITIVE_INFINITY : Math.max(0, Date.parse(nextDue) - wallClock())
      woke = await wake.wait(Math.min(timeoutMs, dueInMs))
      if (woke === "event" && o.batchWindowMs > 0) await wake.sleep(o.batchWindowMs, o.signal)
    }
  } finally {
    watcher?.close()
    o.signal.removeEventListener("abort", onAbort)
  }
  if (isReportDue) await writeReports(o.queue, o.ledger)
  return total
}

/** Starts fs.watch on inbox/; undefined (rescans only) when the system refuses a watch. */
function watchInbox(inbox: string, log: Log, onEvent: () => void): fs.FSWatcher | undefined {
  try {
    const watcher = fs.watch(inbox, { persistent: false }, (_type, name) => {
      // A producer's temp file (.x.json, x.json.tmp) is no message yet; its rename into x.json is.
      // A name no longer in inbox/ is a file leaving it (this consumer's own claims, whose
      // events would wake it for an empty drain after each one) or one already taken.
      if (name === null) onEvent()
      else if (isMessageName(String(name)) && fs.existsSync(join(inbox, String(name)))) onEvent()
    })
    watcher.on("error", (error) => {
      log.warn("watch-failed", { dir: inbox, error, note: watchFailureNote(error) })
      watcher.close()
    })
    return watcher
  } catch (error) {
    log.warn("watch-failed", { dir: inbox, error, note: watchFailureNote(error) })
    return undefined
  }
}

/** What a refused inotify watch means: its two limits give errors that read like other things. */
function watchFailureNote(error: unknown): string {
  const rescans = "falling back to periodic rescans"
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  // ENOSPC is the watch limit (not a full disk), EMFILE the limit of inotify instances.
  if (code === "ENOSPC")
    return `${rescans}; the inotify watch limit is reached: raise it (sysctl fs.inotify.max_user_watches=524288)`
  if (code === "EMFILE")
    return `${rescans}; the inotify instance limit is reached: raise it (sysctl fs.inotify.max_user_instances=1024)`
  return rescans
}

/** The longest a timer waits: a longer one (--rescan 25d) fires at once, over and over. */
const maxTimerMs = 2 ** 31 - 1

/** A latch that events set and the loop waits on, with a timeout. */
class Wakeup {
  #fired: Wake | undefined
  #resolve: ((w: Wake) => void) | undefined

  get isFired(): boolean {
    return this.#fired !== undefined
  }

  fire(w: Wake): void {
    if (this.#fired === undefined || w === "abort") this.#fired = w
    this.#resolve?.(w)
  }

  reset(): void {
    this.#fired = this.#fired === "abort" ? "abort" : undefined
  }

  wait(timeoutMs: number): Promise<Wake> {
    if (this.#fired !== undefined) return Promise.resolve(this.#fired)
    return new Promise((resolve) => {
      const timer = setTimeout(() => done("timer"), Math.min(timeoutMs, maxTimerMs))
      const done = (w: Wake) => {
        clearTimeout(timer)
        this.#resolve = undefined
        resolve(w)
      }
      this.#resolve = done
    })
  }

  /** Sleeps `ms`, or less if stopped. */
  sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (ms <= 0 || signal.aborted) return Promise.resolve()
    return new Promise((resolve) => {
      const timer = setTimeout(finish, Math.min(ms, maxTimerMs))
      function finish() {
        clearTimeout(timer)
        signal.removeEventListener("abort", finish)
        resolve()
      }
      signal.addEventListener("abort", finish, { once: true })
    })
  }
}

function addTo(total: ConsumeSummary, s: Readonly<ConsumeSummary>): void {
  total.claimed += s.claimed
  total.processed += s.processed
  total.duplicates += s.duplicates
  total.conflicts += s.conflicts
  total.rejected += s.rejected
  total.recovered += s.recovered
  total.lost += s.lost
  total.batches += s.batches
  total.deferred += s.deferred
  for (const [r, n] of Object.entries(s.rejectedBy) as [keyof ConsumeSummary["rejectedBy"], number][])
    total.rejectedBy[r] = (total.rejectedBy[r] ?? 0) + n
}
