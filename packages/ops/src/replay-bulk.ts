// Bulk replay: which files of error/ a selection names, and their replay one by one, each
// refused (a taken name) or skipped (it would fail the same way) on its own without stopping
// the rest.
import fs from "node:fs"
import { join } from "node:path"
import { classOf, type ErrorClass, type LedgerPort, type Queue, SpoolError } from "@spool/core/engine"
import {
  type MoveOutcome,
  moveAndMark,
  type RepeatPolicy,
  type Replayed,
  readUnchanged,
  replayRefusal,
  whyOf,
} from "./replay-move.ts"
import { publishAndMark, type ReplayTarget, type SourceHandle, sourceRefusal } from "./replay-publish.ts"
import { type Repeat, tooOftenRepeat } from "./replay-unchanged.ts"

/** Gives the ledger when first needed (undefined: there is none yet, so nothing is recorded). */
export type LedgerSource = () => LedgerPort | undefined | Promise<LedgerPort | undefined>

/** Which files of error/ a bulk replay selects: named ones, or by glob, failure reason or class, msg_id, or all. */
export type Selection =
  | { readonly kind: "names"; readonly names: readonly string[] }
  | { readonly kind: "match"; readonly patterns: readonly string[] }
  | { readonly kind: "reason"; readonly reason: string }
  | { readonly kind: "class"; readonly errorClass: ErrorClass }
  | { readonly kind: "id"; readonly msgId: string }
  | { readonly kind: "all" }

/** How a bulk replay treats each selected file. */
export interface BulkOptions extends RepeatPolicy {
  /** Decide and report everything, move nothing. */
  readonly isDryRun: boolean
  readonly now: Date
  /** Where a file a broker delivered goes (default origin: back to the broker; a dropped file always goes to inbox/). */
  readonly target?: ReplayTarget
  /** The broker of `--source`, for the files that go back to their origin. */
  readonly source?: SourceHandle
}

/** What a bulk replay did with one selected file: `repeat` says why a file moved anyway will fail again. */
export type BulkOutcome =
  | { readonly file: string; readonly kind: "moved"; readonly replayed: Replayed }
  | { readonly file: string; readonly kind: "would-move"; readonly repeat: Repeat | undefined; readonly to?: string }
  | { readonly file: string; readonly kind: "skipped"; readonly repeat: Repeat }
  | { readonly file: string; readonly kind: "refused"; readonly why: string }

/**
 * The names a selection picks in error/, sorted, each once. Named files are taken as given (a
 * name that is not there is refused later); the others are entries directly in error/ of any
 * type, so a link, directory or FIFO is selected and then refused, never skipped silently. A
 * selection by reason or class asks `ledger` for the root's ledger if it has one, and creates
 * none. A selection by msg_id reads the files themselves (see `filesWithMsgId`).
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
    case "class": {
      const reasons = await (await ledger())?.failureReasons()
      if (reasons === undefined) return []
      return unique(
        fs.readdirSync(queue.error).filter((n) => {
          const reason = reasons.get(n)
          return reason !== undefined && classOf(reason) === selection.errorClass
        }),
      )
    }
    case "id":
      return unique(filesWithMsgId(queue.error, selection.msgId))
    case "match":
      return unique(await matchNames(queue.error, selection.patterns))
  }
}

/** A file in error/ larger than this is not read for its msg_id (a too-large file may be any size). */
const maxIdFileBytes = 64 * 1024 * 1024

/**
 * The regular files directly in `dir` whose JSON top level has `msg_id` equal to `msgId`, read
 * as consume reads them (UTF-8, a leading byte order mark dropped, the last of duplicate keys).
 * The ledger records no msg_id with a failure, and the bytes in error/ are what a replay sends
 * again, so the files are the truth: a file that does not parse carries no msg_id.
 */
function filesWithMsgId(dir: string, msgId: string): string[] {
  const decoder = new TextDecoder("utf-8", { fatal: true })
  return fs.readdirSync(dir).filter((name) => {
    const path = join(dir, name)
    try {
      const st = fs.lstatSync(path)
      if (!st.isFile() || st.size > maxIdFileBytes) return false
      const value: unknown = JSON.parse(decoder.decode(fs.readFileSync(path)))
      return typeof value === "object" && value !== null && (value as { msg_id?: unknown }).msg_id === msgId
    } catch {
      // Not JSON, not UTF-8, or gone since the listing: it carries no msg_id to match.
      return false
    }
  })
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
 * no-replace move in one transaction); a refused file is reported and left where it is, and
 * the others still move. A file that would fail the same way (see `Repeat`) is skipped unless
 * `isTakingRepeats`. Reports are not rewritten here (once, by the caller). `ledger` is asked for
 * only once a file passes the checks, so a run that refuses everything never creates a ledger;
 * in a dry run it may give undefined (no ledger yet).
 */
export async function replayFiles(
  queue: Queue,
  ledger: LedgerSource,
  files: readonly string[],
  options: BulkOptions,
  onOutcome: (outcome: BulkOutcome) => Promise<void> | void = () => {},
): Promise<BulkOutcome[]> {
  const outcomes: BulkOutcome[] = []
  for (const file of files) {
    const why = replayRefusal(queue, file)
    const outcome: BulkOutcome =
      why !== undefined
        ? { file, kind: "refused", why }
        : options.isDryRun
          ? await judge(queue, await ledger(), file, options)
          : await replayOne(queue, await ledger(), file, options)
    outcomes.push(outcome)
    await onOutcome(outcome)
  }
  return outcomes
}

/** A dry run's verdict on a file that passed the checks, decided as a real run decides it. */
async function judge(
  queue: Queue,
  ledger: LedgerPort | undefined,
  file: string,
  options: BulkOptions,
): Promise<BulkOutcome> {
  const count = (await ledger?.replayCount(file)) ?? 0
  const repeat =
    tooOftenRepeat(count, options.maxReplays) ?? readUnchanged(queue, file, await ledger?.unreplayedFailure(file))
  if (repeat !== undefined && !options.isTakingRepeats) return { file, kind: "skipped", repeat }
  const origin = options.target === "inbox" ? undefined : await ledger?.failureOrigin(file)
  if (origin === undefined) return { file, kind: "would-move", repeat }
  const o = origin.origin
  const missing = options.source?.url === undefined ? sourceRefusal(origin, undefined) : undefined
  if (missing !== undefined) return { file, kind: "refused", why: missing }
  return { file, kind: "would-move", repeat, to: `${o.source} (${o.address})` }
}

async function replayOne(
  queue: Queue,
  ledger: LedgerPort | undefined,
  file: string,
  options: BulkOptions,
): Promise<BulkOutcome> {
  if (ledger === undefined) throw new Error("replayFiles: a real run needs the ledger")
  try {
    const origin = options.target === "inbox" ? undefined : await ledger.failureOrigin(file)
    let r: MoveOutcome
    if (origin === undefined) r = await moveAndMark(queue, ledger, file, options.now, options)
    else {
      const source = options.source?.url === undefined ? undefined : await options.source.open()
      const why = sourceRefusal(origin, source)
      if (why !== undefined || source === undefined) return { file, kind: "refused", why: why ?? "no --source" }
      r = await publishAndMark(queue, ledger, source, file, origin, options.now, options)
    }
    return r.kind === "moved"
      ? { file, kind: "moved", replayed: r.replayed }
      : { file, kind: "skipped", repeat: r.repeat }
  } catch (error) {
    // Refused inside the transaction (the name taken, or the file gone, since the checks): rolled
    // back, so this file is untouched; anything else (I/O, a locked ledger) stops the run.
    if (!(error instanceof SpoolError) || error.code !== "refused") throw error
    return { file, kind: "refused", why: whyOf(file, error.message) }
  }
}
