import type { LagReport } from "./measure.ts"

/** The thresholds a lag check compares against. */
export interface LagLimits {
  /** Undefined when no THRESHOLD was given (a --histogram look). */
  readonly threshold: number | undefined
  /** In seconds; undefined when no --max-age was given. */
  readonly maxAgeSeconds: number | undefined
  /** In seconds; undefined when no --stalled-after was given. */
  readonly stalledAfterSeconds?: number | undefined
}

/** Files waiting for a consumer: the inbox/ messages and the claimed files in processing/. */
export function waitingCount(r: LagReport): number {
  return r.inbox + r.processing
}

/**
 * Whether the queue is stalled: files wait, nothing has entered done/ or error/ for longer than
 * `afterSeconds`, and the oldest waiting file has waited longer than that too (so a burst
 * landing on a queue that was idle all night is not called stalled before a consumer could
 * take it).
 */
export function isStalled(r: LagReport, afterSeconds: number | undefined): boolean {
  if (afterSeconds === undefined || waitingCount(r) === 0) return false
  const oldest = Math.max(r.oldestInboxAgeSeconds, r.oldestProcessingAgeSeconds)
  return r.idleSeconds > afterSeconds && oldest > afterSeconds
}

/** The phrase that says a queue is stalled, starting with the word `stalled`. */
export function stalledPhrase(r: LagReport): string {
  const n = waitingCount(r)
  return `stalled: nothing reached done/ or error/ for ${formatSeconds(r.idleSeconds)} while ${n} ${n === 1 ? "file waits" : "files wait"}`
}

/** Why a lag check failed, one phrase per limit crossed; empty when it passed. */
export function lagViolations(report: LagReport, limits: LagLimits): string[] {
  const out: string[] = []
  if (limits.threshold !== undefined && report.inbox > limits.threshold)
    out.push(`inbox=${report.inbox} is over the threshold ${limits.threshold}`)
  if (limits.maxAgeSeconds !== undefined && report.oldestInboxAgeSeconds > limits.maxAgeSeconds)
    out.push(
      `the oldest message in inbox/ is ${formatSeconds(report.oldestInboxAgeSeconds)} old, over --max-age ${formatSeconds(limits.maxAgeSeconds)}`,
    )
  if (isStalled(report, limits.stalledAfterSeconds))
    out.push(`${stalledPhrase(report)} (--stalled-after ${formatSeconds(limits.stalledAfterSeconds ?? 0)})`)
  return out
}

/** An age as a person reads it: whole seconds under two minutes, then minutes, then hours. */
export function formatSeconds(s: number): string {
  return s < 120 ? `${Math.floor(s)}s` : s < 7200 ? `${Math.floor(s / 60)}m` : `${Math.floor(s / 3600)}h`
}
