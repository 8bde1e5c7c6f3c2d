// The commit verdict rules, written once for both ledgers. An adapter asks its database the
// questions in the order below, in its own way (SQLite statement by statement, PostgreSQL set-wise),
// tells a Judgement the answers, and writes the rows it returns; the verdicts are decided here.
//
//   1. the fence      each claim this owner still holds is marked committed: an outcome whose
//                     claim it no longer holds is `lost` and records nothing; a vanished file's
//                     claim still held ends (`vanished`); a rejection becomes a failures row
//   2. the horizon    an accepted msg_id the ledger does not know, at or below its order's
//                     pruned seq, is `beyond-horizon` (compact forgot whether it was processed)
//   3. the key        the processed row is inserted under the PRIMARY KEY, in batch order: the
//                     row it takes is `processed` (and the effect runs); the effect throwing
//                     rolls that row back (`handler-rejected`), freeing the key for the next
//                     delivery of the msg_id in the batch, as in a sequential run
//   4. the repeat     a delivery whose key was taken is a `duplicate` of the processed one, or a
//                     `conflict` when its content differs
//   5. the deferral   an effect that threw a TransientError is `deferred`: its deferrals row is
//                     written (attempts and first time carried over from the row of the claim
//                     that picked it up, if any) and its claim points at deferred/; past the
//                     policy's maximum age it is `expired` instead, a failure. Every other held
//                     claim's deferrals row is closed: the file has an outcome
//
// Rejections, horizons and failed effects go to error/: their failures rows, and the claims of
// accepted outcomes the ledger refused after all, which must point at error/ instead of done/.

import { backoffMs, type DeferPolicy, defaultDeferPolicy, isTransient } from "../transient.ts"
import { type AcceptedOutcome, beyondHorizon, type Outcome, type Verdict } from "./model.ts"
import { toStorableText } from "./storable-text.ts"

/** A failures row to write. `detail` is free text (a parser's message, an effect's error), made storable. */
interface FailureRow {
  readonly file: string
  readonly original: string
  readonly reason: string
  readonly detail: string
  readonly hash: string | null
  readonly claimId: string
}

/** A duplicates row to write. */
interface DuplicateRow {
  readonly outcome: AcceptedOutcome
  readonly isConflict: boolean
}

/** A deferrals row to write (insert, or update the one this claim picked up). */
interface DeferralRow {
  readonly outcome: AcceptedOutcome
  readonly attempts: number
  readonly firstDeferredAt: string
  readonly nextAttemptAt: string
  /** The effect's error, made storable. */
  readonly lastError: string
  /** Whether the claim picked up a deferrals row (its file came from deferred/): that row is updated. */
  readonly isPickedUp: boolean
}

/** The deferrals row of the claim whose effect failed transiently, if it picked one up, as its adapter read it. */
export interface PriorDeferral {
  readonly attempts: number
  readonly firstDeferredAt: string
}

/** Where the fence marks a held claim's file to go: a rejection to error/ under its chosen name. */
export function destinationOf(o: Exclude<Outcome, { kind: "vanished" }>): {
  dest: "done" | "error"
  destName: string | null
} {
  return o.kind === "rejected" ? { dest: "error", destName: o.destName } : { dest: "done", destName: null }
}

/** Whether a redelivery conflicts with the processed delivery of its msg_id: their contents differ. */
function isConflict(processedContentHash: string, contentHash: string): boolean {
  return processedContentHash !== contentHash
}

/**
 * The stored text of an effect's result: its JSON, undefined for none. A result JSON cannot write
 * (a function, a bigint, a cycle) or a promise where the effect must be synchronous is the
 * effect's failure: the message goes to error/ as `handler`, never with half a result.
 */
export function resultText(result: unknown, isSync = false): string | undefined {
  if (result === undefined) return undefined
  if (isSync && typeof (result as PromiseLike<unknown>)?.then === "function")
    throw new Error(
      "the handler returned a promise: on the SQLite ledger it must be synchronous (its writes after an await would land outside the transaction)",
    )
  let text: string | undefined
  try {
    text = JSON.stringify(result)
  } catch (error) {
    throw new Error(`the handler's result cannot be stored as JSON: ${error instanceof Error ? error.message : error}`)
  }
  if (text === undefined) throw new Error(`the handler's result cannot be stored as JSON (a ${typeof result})`)
  return text
}

/** A stored result as the effect returned it (its JSON parsed), undefined for none. */
export function parseResult(text: string | null | undefined): unknown {
  return text === null || text === undefined ? undefined : JSON.parse(text)
}

/** One batch's verdicts, decided from the answers its adapter gets from the database. */
export class Judgement {
  readonly outcomes: readonly Outcome[]
  /** The failures rows to write, in the order they were decided. */
  readonly failures: FailureRow[] = []
  /** The duplicates rows to write, in batch order within each round of inserts. */
  readonly duplicates: DuplicateRow[] = []
  /** The deferrals rows to write, in the order they were decided. */
  readonly deferrals: DeferralRow[] = []
  readonly #verdicts = new Map<string, Verdict>()
  readonly #now: string
  readonly #policy: DeferPolicy
  #lastRound = -1

  constructor(outcomes: readonly Outcome[], now = new Date().toISOString(), policy: DeferPolicy = defaultDeferPolicy) {
    this.outcomes = outcomes
    this.#now = now
    this.#policy = policy
  }

  /** Step 1: whether the fence found the outcome's claim still held by the committing owner. */
  fence(o: Outcome, isHeld: boolean): void {
    if (!isHeld) this.#verdicts.set(o.claimId, "lost")
    else if (o.kind === "vanished") this.#verdicts.set(o.claimId, "vanished")
    else if (o.kind === "rejected") {
      this.#verdicts.set(o.claimId, "rejected")
      this.#fail(o.destName, o.name, o.reason, o.detail, o.hash, o.claimId)
    }
  }

  /**
   * Step 3's next round of inserts: the accepted outcomes with no verdict yet, in batch order.
   * Every round decides at least the first delivery of each msg_id in it, so a round that
   * decided nothing means the database contradicted its own constraint: it throws.
   */
  nextRound(): AcceptedOutcome[] {
    const round = this.undecided()
    if (round.length > 0 && round.length === this.#lastRound)
      throw new Error(`the commit's inserts decided none of ${round.length} outcomes in a round`)
    this.#lastRound = round.length
    return round
  }

  /** The accepted outcomes past the fence with no verdict yet, in batch order. */
  undecided(): AcceptedOutcome[] {
    return this.outcomes.filter((o): o is AcceptedOutcome => o.kind === "accepted" && !this.#verdicts.has(o.claimId))
  }

  /**
   * Step 2: `maxSeq` is the highest seq compact pruned of the outcome's order (undefined: none),
   * `isKnown` whether the ledger holds a processed row for its msg_id.
   */
  horizon(o: AcceptedOutcome, maxSeq: number | string | undefined, isKnown: boolean): void {
    if (maxSeq === undefined || isKnown || o.seq > Number(maxSeq)) return
    this.#verdicts.set(o.claimId, "beyond-horizon")
    this.#fail(o.name, o.name, "beyond-horizon", beyondHorizon(o.seq, maxSeq, o.orderNo), o.hash, o.claimId)
  }

  /** Step 3: the PRIMARY KEY took the outcome's processed row. */
  inserted(o: AcceptedOutcome): void {
    this.#verdicts.set(o.claimId, "processed")
  }

  /**
   * Step 3: the effect of an inserted outcome threw, and its writes and processed row were rolled
   * back. A TransientError is step 5: `prior` is the deferrals row its claim picked up (ask for it
   * with `isTransient` true only), undefined for a first deferral.
   */
  effectFailed(o: AcceptedOutcome, error: unknown, prior?: PriorDeferral): void {
    const message = error instanceof Error ? error.message : String(error)
    if (!isTransient(error)) {
      this.#verdicts.set(o.claimId, "handler-rejected")
      this.#fail(o.name, o.name, "handler", message, o.hash, o.claimId)
      return
    }
    const now = Date.parse(this.#now)
    const first = prior?.firstDeferredAt ?? this.#now
    const attempts = (prior?.attempts ?? 0) + 1
    const ageMs = now - Date.parse(first)
    if (ageMs >= this.#policy.maxAgeMs) {
      this.#verdicts.set(o.claimId, "expired")
      const detail = `still failing transiently after ${attempts} attempts since ${first}: ${message}`
      this.#fail(o.name, o.name, "expired", detail, o.hash, o.claimId)
      return
    }
    this.#verdicts.set(o.claimId, "deferred")
    this.deferrals.push({
      outcome: o,
      attempts,
      firstDeferredAt: first,
      nextAttemptAt: new Date(now + backoffMs(this.#policy, attempts, error.retryAfterMs)).toISOString(),
      lastError: toStorableText(message),
      isPickedUp: prior !== undefined,
    })
  }

  /** Step 5: the held claims whose deferrals row, if they picked one up, is closed (every outcome but `deferred` and `lost`). */
  closed(): string[] {
    return this.outcomes.flatMap((o) => {
      const v = this.#verdicts.get(o.claimId)
      return v === "deferred" || v === "lost" ? [] : [o.claimId]
    })
  }

  /**
   * Step 4: the PRIMARY KEY refused the outcome's row. `processedContentHash` is the content hash
   * of the processed row holding its msg_id, undefined when there is none any more: the row was
   * this batch's and its effect failed, so the key is free and the outcome is inserted again.
   * Returns whether it is decided.
   */
  refused(o: AcceptedOutcome, processedContentHash: string | undefined): boolean {
    if (processedContentHash === undefined) return false
    const conflict = isConflict(processedContentHash, o.contentHash)
    this.#verdicts.set(o.claimId, conflict ? "conflict" : "duplicate")
    this.duplicates.push({ outcome: o, isConflict: conflict })
    return true
  }

  /** Accepted outcomes the ledger refused after all (horizon, effect, expiry): their claims point at error/ under their own names. */
  redirected(): AcceptedOutcome[] {
    return this.outcomes.filter((o): o is AcceptedOutcome => {
      const v = this.#verdicts.get(o.claimId)
      return o.kind === "accepted" && (v === "handler-rejected" || v === "beyond-horizon" || v === "expired")
    })
  }

  /** The verdicts, in batch order. Every outcome has one once the rounds of inserts are done. */
  verdicts(): Verdict[] {
    return this.outcomes.map((o) => {
      const v = this.#verdicts.get(o.claimId)
      if (v === undefined) throw new Error(`no verdict for claim ${o.claimId}: the commit skipped a step`)
      return v
    })
  }

  #fail(file: string, original: string, reason: string, detail: string, hash: string | null, claimId: string): void {
    this.failures.push({ file, original, reason, detail: toStorableText(detail), hash, claimId })
  }
}
