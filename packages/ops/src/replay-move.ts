// One file's replay: the checks that make a move safe, and the move with its ledger mark.
import fs from "node:fs"
import { join } from "node:path"
import {
  errnoOf,
  type FailureRecord,
  type LedgerPort,
  type Queue,
  quoteName,
  renameNoReplace,
  SpoolError,
} from "@spool/core/engine"
import { type Repeat, tooOftenRepeat, unchangedRepeat } from "./replay-unchanged.ts"

/** What a successful replay did. */
export interface Replayed {
  readonly file: string
  /** The reason the file had failed with, when the ledger knew it. */
  readonly reason: string | undefined
  /** False when the ledger had no unreplayed failure record under this name. */
  readonly isRecordMarked: boolean
  /** Why it will fail the same way, when it was moved although it repeats. */
  readonly repeat: Repeat | undefined
  /** The broker and address it was published back to; undefined when it went to inbox/. */
  readonly to?: string
}

/** What to do with a file that would fail the same way again. */
export interface RepeatPolicy {
  /** A file the ledger has logged this many replays of repeats (0: any replayed file does). */
  readonly maxReplays: number
  /** Move a repeating file anyway (and say why it repeats), instead of leaving it in error/. */
  readonly isTakingRepeats: boolean
}

/** A replay that moved the file, or one that left it in error/ because it repeats. */
export type MoveOutcome =
  | { readonly kind: "moved"; readonly replayed: Replayed }
  | { readonly kind: "skipped"; readonly repeat: Repeat }

/**
 * Refuses any FILE that is not a plain name: replay only ever touches `error/FILE` and
 * `inbox/FILE`, so nothing the operator types can reach outside those two directories.
 */
export function checkReplayName(file: string): void {
  const why = nameRefusal(file)
  if (why !== undefined) throw refusal(file, why)
}

/** The error of a replay that changed nothing, for the reason `why`. */
export function refusal(file: string, why: string): SpoolError {
  return new SpoolError("refused", `refusing to replay ${quoteName(file)}: ${why}; nothing was changed`)
}

function nameRefusal(file: string): string | undefined {
  if (file === "") return "the name is empty"
  if (file === "." || file === "..") return "it is not a file name"
  if (file.includes("/"))
    return `give the name of a file directly in error/, without a path (e.g. ${quoteName(baseName(file))})`
  if (file.includes("\0")) return "the name contains a NUL byte"
  return undefined
}

function baseName(path: string): string {
  return (
    path
      .split("/")
      .filter((p) => p !== "" && p !== "." && p !== "..")
      .at(-1) ?? "NAME"
  )
}

function lstatOrUndefined(path: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(path)
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return undefined
    throw new SpoolError("io", `cannot read ${path}: ${String(error)}`, { cause: error })
  }
}

/**
 * Checks, without changing anything, that `error/FILE` can go back to `inbox/FILE`: it is a
 * regular file (not a link, FIFO or directory) and the name is free in inbox/ and processing/.
 */
export function checkReplayable(queue: Queue, file: string): void {
  const why = replayRefusal(queue, file)
  if (why !== undefined) throw refusal(file, why)
}

/** Why `error/FILE` cannot go back to inbox/, or undefined when it can. */
export function replayRefusal(queue: Queue, file: string): string | undefined {
  const badName = nameRefusal(file)
  if (badName !== undefined) return badName
  const st = lstatOrUndefined(join(queue.error, file))
  if (st === undefined) {
    if (lstatOrUndefined(join(queue.done, file)) !== undefined)
      return "it is in done/ (it was processed), not in error/; only failed messages can be replayed"
    if (lstatOrUndefined(join(queue.inbox, file)) !== undefined)
      return "it is in inbox/, not in error/ (already replayed, or not yet consumed)"
    return `there is no such file in ${queue.error}/; see error.csv for the files that can be replayed`
  }
  if (st.isSymbolicLink()) return "error/ holds a symbolic link under that name, not a message; inspect it by hand"
  if (!st.isFile()) return "error/ holds something other than a regular file under that name; inspect it by hand"
  if (lstatOrUndefined(join(queue.inbox, file)) !== undefined)
    return "inbox/ already holds a file of that name; move or rename one of them first"
  if (lstatOrUndefined(join(queue.processing, file)) !== undefined)
    return "a consumer is processing a file of that name right now; wait for it to finish and retry"
  return undefined
}

/** The reason part of a refusal's message (bulk replay prints one line per file in its own words). */
export function whyOf(file: string, message: string): string {
  const prefix = `refusing to replay ${quoteName(file)}: `
  const suffix = "; nothing was changed"
  const why = message.startsWith(prefix) ? message.slice(prefix.length) : message
  return why.endsWith(suffix) ? why.slice(0, -suffix.length) : why
}

/**
 * Checks that `error/FILE` can go back to inbox/ and moves it there (see `moveAndMark`), also
 * when it repeats: naming one file is the operator's decision. `maxReplays` only decides whether
 * the result says it was replayed too often.
 */
export async function replayFile(
  queue: Queue,
  ledger: LedgerPort,
  file: string,
  now = new Date(),
  maxReplays = Number.POSITIVE_INFINITY,
): Promise<Replayed> {
  checkReplayable(queue, file)
  const r = await moveAndMark(queue, ledger, file, now, { maxReplays, isTakingRepeats: true })
  if (r.kind === "skipped") throw new Error("replayFile: a repeating file was skipped although taken")
  return r.replayed
}

/**
 * Thrown inside the ledger transaction to roll it back when a repeating file is to stay in
 * error/. A SpoolError, because the ledgers pass those through as they are (PostgreSQL's turns
 * any other error into a ledger failure).
 */
class Skip extends SpoolError {
  constructor(readonly repeat: Repeat) {
    super("refused", "it would fail the same way")
  }
}

/**
 * The move and the ledger update of a replay, after the checks of `replayRefusal`. The move is
 * renameat2(RENAME_NOREPLACE), so an inbox file that appears after the checks is never
 * replaced; it runs inside the ledger transaction, so a refused move rolls the ledger back. A
 * crash between the move and COMMIT leaves the file in inbox/ with its record unmarked: the
 * message is consumed again, never lost. A repeating file (see `Repeat`) is decided inside the
 * same transaction, its bytes read just before the rename: without `isTakingRepeats` it stays in
 * error/ and nothing is written, so two concurrent replays cannot both pass the limit; with it,
 * it moves, its replay is logged like any other, and the outcome says why it repeats.
 */
export async function moveAndMark(
  queue: Queue,
  ledger: LedgerPort,
  file: string,
  now: Date,
  policy: RepeatPolicy,
): Promise<MoveOutcome> {
  const failure = await ledger.unreplayedFailure(file)
  // Taken anyway, the limit only informs the warning, so it is read before the transaction.
  const tooOften = policy.isTakingRepeats
    ? tooOftenRepeat(await ledger.replayCount(file), policy.maxReplays)
    : undefined
  let unchanged: Repeat | undefined
  const move = () => {
    unchanged = readUnchanged(queue, file, failure)
    if (unchanged !== undefined && !policy.isTakingRepeats) throw new Skip(unchanged)
    moveBack(queue, file, now)
  }
  try {
    const limit = policy.isTakingRepeats ? Number.POSITIVE_INFINITY : policy.maxReplays
    const r = await ledger.recordReplay(file, now.toISOString(), move, limit)
    if (r.kind === "too-often")
      return { kind: "skipped", repeat: { kind: "too-often", count: r.count, maxReplays: policy.maxReplays } }
    const replayed = { file, reason: failure?.reason, isRecordMarked: r.isRecordMarked, repeat: tooOften ?? unchanged }
    return { kind: "moved", replayed }
  } catch (error) {
    if (error instanceof Skip) return { kind: "skipped", repeat: error.repeat }
    throw error
  }
}

/** `unchangedRepeat` of `error/FILE`; undefined when it is gone (the rename then refuses it). */
export function readUnchanged(queue: Queue, file: string, failure: FailureRecord | undefined): Repeat | undefined {
  const path = join(queue.error, file)
  try {
    return unchangedRepeat(path, failure)
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return undefined
    throw new SpoolError("io", `cannot read ${path}: ${String(error)}`, { cause: error })
  }
}

/**
 * The no-replace rename of a replay, inside its ledger transaction: a refusal rolls it back.
 * Once the file is in inbox/, its mtime is set to the replay's time, so its age (lag's
 * --max-age, consume's --min-age) counts from the replay, not from the producer's write. A
 * crash between the rename and that leaves the old mtime, which only makes the file look older.
 */
function moveBack(queue: Queue, file: string, now: Date): void {
  const to = join(queue.inbox, file)
  const moved = renameNoReplace(join(queue.error, file), to)
  if (moved === "exists") throw refusal(file, "a file of that name just appeared in inbox/")
  if (moved === "missing") throw refusal(file, "it left error/ while replay ran")
  try {
    fs.utimesSync(to, now, now)
  } catch {
    // The file is in inbox/ already: a consumer may have claimed it (ENOENT), and a failure here
    // must not roll back the ledger's mark of a move that happened. The age is only advisory.
  }
}
