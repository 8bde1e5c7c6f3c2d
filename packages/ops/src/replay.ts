import fs from "node:fs"
import { join } from "node:path"
import {
  type CommandSpec,
  ExitCode,
  errnoOf,
  Ledger,
  openQueue,
  type Queue,
  renameNoReplace,
  resolveRoot,
  runCommand,
  SpoolError,
  writeReports,
} from "@spool/core"
import { writeErr } from "./_io.ts"

/** What a successful replay did. */
export interface Replayed {
  readonly file: string
  /** The reason the file had failed with, when the ledger knew it. */
  readonly reason: string | undefined
  /** False when the ledger had no unreplayed failure record under this name. */
  readonly isRecordMarked: boolean
}

/**
 * Refuses any FILE that is not a plain name: replay only ever touches `error/FILE` and
 * `inbox/FILE`, so nothing the operator types can reach outside those two directories.
 */
export function checkReplayName(file: string): void {
  const refuse = (why: string) => {
    throw new SpoolError("refused", `refusing to replay ${JSON.stringify(file)}: ${why}; nothing was changed`)
  }
  if (file === "") refuse("the name is empty")
  if (file === "." || file === "..") refuse("it is not a file name")
  if (file.includes("/"))
    refuse(`give the name of a file directly in error/, without a path (e.g. ${JSON.stringify(baseName(file))})`)
  if (file.includes("\0")) refuse("the name contains a NUL byte")
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
  checkReplayName(file)
  const refuse = (why: string): never => {
    throw new SpoolError("refused", `refusing to replay ${JSON.stringify(file)}: ${why}; nothing was changed`)
  }
  const st = lstatOrUndefined(join(queue.error, file))
  if (st === undefined) {
    if (lstatOrUndefined(join(queue.done, file)) !== undefined)
      refuse("it is in done/ (it was processed), not in error/; only failed messages can be replayed")
    if (lstatOrUndefined(join(queue.inbox, file)) !== undefined)
      refuse("it is in inbox/, not in error/ (already replayed, or not yet consumed)")
    refuse(`there is no such file in ${queue.error}/; see error.csv for the files that can be replayed`)
  } else if (st.isSymbolicLink())
    refuse("error/ holds a symbolic link under that name, not a message; inspect it by hand")
  else if (!st.isFile()) refuse("error/ holds something other than a regular file under that name; inspect it by hand")
  if (lstatOrUndefined(join(queue.inbox, file)) !== undefined)
    refuse("inbox/ already holds a file of that name; move or rename one of them first")
  if (lstatOrUndefined(join(queue.processing, file)) !== undefined)
    refuse("a consumer is processing a file of that name right now; wait for it to finish and retry")
}

/**
 * Moves `error/FILE` back to `inbox/FILE` and marks its failure record replayed, or changes
 * nothing. The move is renameat2(RENAME_NOREPLACE), so an inbox file that appears after the
 * checks is never replaced; it runs inside the ledger transaction, so a refused move rolls the
 * ledger back. A crash between the move and COMMIT leaves the file in inbox/ with its record
 * unmarked: the message is consumed again, never lost.
 */
export function replayFile(queue: Queue, ledger: Ledger, file: string, now = new Date()): Replayed {
  checkReplayable(queue, file)
  return moveAndMark(queue, ledger, file, now)
}

/** The move and the ledger update of a replay, without the checks (exported for tests of the race). */
export function moveAndMark(queue: Queue, ledger: Ledger, file: string, now: Date): Replayed {
  const reason = ledger.failureReason(file)
  const isRecordMarked = ledger.transaction(() => {
    const isMarked = ledger.markReplayed(file, now.toISOString())
    const moved = renameNoReplace(join(queue.error, file), join(queue.inbox, file))
    if (moved === "exists")
      throw new SpoolError(
        "refused",
        `refusing to replay ${JSON.stringify(file)}: a file of that name just appeared in inbox/; nothing was changed`,
      )
    if (moved === "missing")
      throw new SpoolError(
        "refused",
        `refusing to replay ${JSON.stringify(file)}: it left error/ while replay ran; nothing was changed`,
      )
    return isMarked
  })
  return { file, reason, isRecordMarked }
}

const spec = {
  name: "replay",
  usage: "replay.sh [--root DIR] [--] FILE",
  summary:
    "Moves ROOT/error/FILE back to ROOT/inbox/FILE so the next consume retries it, marks its failure\n" +
    "record in ROOT/ledger.db as replayed, and rewrites ROOT/error.csv. FILE is a name directly in\n" +
    "error/ (see error.csv). Refuses, changing nothing, when FILE is a path, is not a regular file in\n" +
    "error/, or its name is taken in inbox/ or processing/. The move never replaces a file.",
  options: { root: { type: "string" } },
  help: [
    "FILE                  name of a file in error/ (use -- before a name that starts with -)",
    "--root DIR            queue root (default: $SPOOL_ROOT, else ./spool)",
  ],
  allowPositionals: true,
} satisfies CommandSpec<Record<string, { type: "string" }>>

/** `replay FILE`: send one failed message back to inbox/. Exit 1 when refused (nothing changed). */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values, positionals }) => {
    const [file, ...extra] = positionals
    if (file === undefined) throw new SpoolError("usage", "missing FILE (the name of a file in error/)")
    if (extra.length > 0)
      throw new SpoolError("usage", `replay takes one FILE; unexpected argument ${JSON.stringify(extra[0])}`)
    const queue = openQueue(resolveRoot(values.root))
    // Every refusal that can be decided without the ledger is decided before opening it.
    checkReplayable(queue, file)
    const ledger = Ledger.open(queue.ledger)
    try {
      const r = replayFile(queue, ledger, file)
      writeReports(queue, ledger)
      await writeErr(
        `replay: moved error/${r.file} back to inbox/${r.file}` +
          (r.isRecordMarked
            ? ` (failed with ${r.reason ?? "unknown"}; record marked replayed)`
            : " (the ledger had no failure record for it; the replay is logged)") +
          "; run consume to process it\n",
      )
      return ExitCode.ok
    } finally {
      ledger.close()
    }
  })
}
