import type { Claim, Outcome, Verdict } from "../ledger/model.ts"
import type { Log } from "../log.ts"
import type { Reason } from "../message/reasons.ts"

/** What a run did. */
export interface ConsumeSummary {
  claimed: number
  processed: number
  duplicates: number
  conflicts: number
  rejected: number
  rejectedBy: Partial<Record<Reason, number>>
  recovered: number
  /**
   * Claims this consumer no longer held when it committed: another consumer took them over
   * after this one's heartbeat looked stale (or the file was removed from processing/ by
   * hand). Nothing was recorded for them and their files were left to their new owner.
   */
  lost: number
  batches: number
  /** Files sent to deferred/: their effect failed transiently (TransientError), to be tried again when due. */
  deferred: number
  /**
   * Files left for being younger than minAgeMs: by the last pass over inbox/, and by recovery
   * among the orphans in processing/.
   */
  tooYoung: number
  /** Broker deliveries committed before whose ack was lost: acknowledged again, nothing recorded. */
  redelivered: number
}

/** A summary of a run that did nothing yet (to add drains to, as watch mode does). */
export function emptySummary(): ConsumeSummary {
  return {
    claimed: 0,
    processed: 0,
    duplicates: 0,
    conflicts: 0,
    rejected: 0,
    rejectedBy: {},
    recovered: 0,
    lost: 0,
    batches: 0,
    deferred: 0,
    tooYoung: 0,
    redelivered: 0,
  }
}

export function countClaimed(summary: ConsumeSummary, log: Log, items: readonly Claim[]): void {
  summary.claimed += items.length
  for (const item of items) log.debug("claimed", { file: item.name, claim_id: item.claimId })
}

export function countVerdict(summary: ConsumeSummary, log: Log, o: Outcome, v: Verdict): void {
  switch (v) {
    case "lost":
      summary.lost++
      log.warn("lost-claim", {
        file: o.name,
        problem:
          "another consumer took this claim over (this one's heartbeat looked stale); left to it, nothing recorded",
      })
      return
    case "vanished":
      summary.lost++
      log.warn("vanished", {
        file: o.name,
        problem: "removed from processing/ before it was read; nothing recorded",
      })
      return
    case "processed":
      summary.processed++
      return
    case "conflict":
      summary.conflicts++
      summary.duplicates++
      log.warn("conflict", { file: o.name, msg_id: o.kind === "accepted" ? o.msgId : undefined })
      return
    case "duplicate":
      summary.duplicates++
      log.debug("duplicate", { file: o.name, msg_id: o.kind === "accepted" ? o.msgId : undefined })
      return
    case "deferred":
      summary.deferred++
      // An expected outcome, retried by itself and counted in the summary: nothing for a person to do.
      log.info("deferred", {
        file: o.name,
        msg_id: o.kind === "accepted" ? o.msgId : undefined,
        problem: "the handler failed transiently; moved to deferred/ to be tried again",
      })
      return
    case "rejected":
    case "handler-rejected":
    case "beyond-horizon":
    case "expired": {
      const reason: Reason =
        o.kind === "rejected" ? (o.reason as Reason) : v === "beyond-horizon" || v === "expired" ? v : "handler"
      summary.rejected++
      summary.rejectedBy[reason] = (summary.rejectedBy[reason] ?? 0) + 1
      // An expected outcome (counted, listed in error.csv): at -q a run with 1% bad files stays silent.
      if (o.kind === "rejected") log.info("rejected", { file: o.name, reason, detail: o.detail })
      else log.info("rejected", { file: o.name, reason, msg_id: o.kind === "accepted" ? o.msgId : undefined })
    }
  }
}
