// Bulk replay: which files of error/ a selection names, and their replay one by one, each
// refused on its own (a taken name, a replay limit) without stopping the rest.
import fs from "node:fs"
import { type LedgerPort, type Queue, SpoolError } from "@spool/core/engine"
import { moveAndMark, type Replayed, replayRefusal, tooOften, whyOf } from "./replay.ts"

/** Gives the ledger when first needed (undefined: there is none yet, so nothing is recorded). */
export type LedgerSource = () => LedgerPort | undefined | Promise<LedgerPort | undefined>

/** Which files of error/ a bulk replay selects: named ones, or by glob, failure reason, or all. */
export type Selection =
  | { readonly kind: "names"; readonly names: readonly string[] }
  | { readonly kind: "match"; readonly patterns: readonly string[] }
  | { readonly kind: "reason"; readonly reason: string }
  | { readonly kind: "all" }

/** How a bulk replay treats each selected file. */
export interface BulkOptions {
  /** Refuse a file the ledger has logged this many replays of (0: refuse any replayed file). */
  readonly maxReplays: number
  /** Ignore maxReplays. */
  readonly isForced: boolean
  /** Decide and report everything, move nothing. */
  readonly isDryRun: boolean
  readonly now: Date
}

/** What a bulk replay did with one selected file. */
export type BulkOutcome =
  | { readonly file: string; readonly kind: "moved"; readonly replayed: Replayed }
  | { readonly file: string; readonly kind: "would-move" }
  | { readonly file: string; readonly kind: "refused"; readonly why: string }

/**
 * The names a selection picks in error/, sorted, each once. Named files are taken as given (a
 * name that is not there is refused later); the others are entries directly in error/ of any
 * type, so a link, directory or FIFO is selected and then refused, never skipped silently. A
 * selection by reason asks `ledger` for the root's ledger if it has one, and creates none.
 */
export async function selectFiles(queue: Queue, selection: Selection, ledger: LedgerSource): Promise<string[]> {
  const unique = (names: Iterable<string>) => [...new Set(names)].sort()
  switch (selection.kind) {
    case "names":
      return unique(selection.names)
    case "all":
      return unique(fs.readdirSync(queue.error))
    case "reason": {
      // No ledger yet: nothing has failed with any reason (and `ledger` creates none to find that out).
      const reasons = await (await ledger())?.failureReasons()
      if (reasons === undefined) return []
      return unique(fs.readdirSync(queue.error).filter((n) => reasons.get(n) === selection.reason))
    }
    case "match":
      return unique(await matchNames(queue.error, selection.patterns))
  }
}

/**
 * zx's glob (globby over fast-glob), loaded only here: importing zx costs about 70 ms, which the
 * single-file replay must not pay. Options: every entry type (the checks refuse non-files), dot
 * names too (error/ has no hidden files by convention; `--all` takes them as well), one level
 * deep (`**` must not reach into a directory in error/), no directory expansion (globby would
 * otherwise turn a pattern naming a directory into its contents), links not followed.
 */
async function matchNames(dir: string, patterns: readonly string[]): Promise<string[]> {
  const { glob } = await import("zx")
  const names = await glob([...patterns], {
    cwd: dir,
    onlyFiles: false,
    dot: true,
    deep: 1,
    expandDirectories: false,
    followSymbolicLinks: false,
    gitignore: false,
  })
  return names.filter((n) => !n.includes("/"))
}

/**
 * Replays each file on its own, as `replay FILE` does (its checks, then the ledger mark and the
 * no-replace move in one transaction), plus the replay limit; a refused file is reported and
 * left where it is, and the others still move. Reports are not rewritten here (once, by the
 * caller). `ledger` is asked for only once a file passes the checks, so a run that refuses
 * everything never creates a ledger; in a dry run it may give undefined (no ledger yet).
 */
export async function replayFiles(
  queue: Queue,
  ledger: LedgerSource,
  files: readonly string[],
  options: BulkOptions,
  onOutcome: (outcome: BulkOutcome) => Promise<void> | void = () => {},
): Promise<BulkOutcome[]> {
  const outcomes: BulkOutcome[] = []
  const limit = options.isForced ? Number.POSITIVE_INFINITY : options.maxReplays
  for (const file of files) {
    let outcome: BulkOutcome
    const why = replayRefusal(queue, file)
    if (why !== undefined) outcome = { file, kind: "refused", why }
    else if (options.isDryRun) {
      const count = (await (await ledger())?.replayCount(file)) ?? 0
      outcome = count >= limit ? { file, kind: "refused", why: tooOften(count, limit) } : { file, kind: "would-move" }
    } else {
      const l = await ledger()
      if (l === undefined) throw new Error("replayFiles: a real run needs the ledger")
      try {
        const replayed = await moveAndMark(queue, l, file, options.now, limit)
        outcome = { file, kind: "moved", replayed }
      } catch (error) {
        // Refused inside the transaction (limit reached, or the name taken since the checks):
        // rolled back, so this file is untouched; anything else (I/O, a locked ledger) stops the run.
        if (!(error instanceof SpoolError) || error.code !== "refused") throw error
        outcome = { file, kind: "refused", why: whyOf(file, error.message) }
      }
    }
    outcomes.push(outcome)
    await onOutcome(outcome)
  }
  return outcomes
}
