import fs from "node:fs"
import { join } from "node:path"
import {
  type CommandSpec,
  choice,
  dryRun,
  flag,
  integer,
  ledger,
  root,
  runCommand,
  text,
  type Values,
} from "@spool/cli"
import {
  checkRootLedger,
  type ErrorClass,
  ExitCode,
  errnoOf,
  type FailureRecord,
  type LedgerPort,
  openExistingLedger,
  openLedger,
  openQueue,
  type Queue,
  quoteName,
  renameNoReplace,
  resolveLedgerUrl,
  resolveRoot,
  SpoolError,
  writeReports,
} from "@spool/core/engine"
import { writeErr, writeOut } from "./_io.ts"
import { replayFiles, type Selection, selectFiles } from "./replay-bulk.ts"
import { unchangedRefusal } from "./replay-unchanged.ts"

export type { BulkOptions, BulkOutcome, LedgerSource, Selection } from "./replay-bulk.ts"
export { replayFiles, selectFiles } from "./replay-bulk.ts"

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
  const why = nameRefusal(file)
  if (why !== undefined) throw refusal(file, why)
}

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

export function tooOften(count: number, maxReplays: number): string {
  return (
    `it was already replayed ${count} time${count === 1 ? "" : "s"} (--max-replays ${maxReplays}); ` +
    "a message that keeps failing needs a fix, not another replay: inspect it, or pass --force"
  )
}

/**
 * Moves `error/FILE` back to `inbox/FILE` and marks its failure record replayed, or changes
 * nothing. The move is renameat2(RENAME_NOREPLACE), so an inbox file that appears after the
 * checks is never replaced; it runs inside the ledger transaction, so a refused move rolls the
 * ledger back. A crash between the move and COMMIT leaves the file in inbox/ with its record
 * unmarked: the message is consumed again, never lost. A format error's file unchanged since
 * it failed is refused (see `unchangedRefusal`).
 */
export async function replayFile(queue: Queue, ledger: LedgerPort, file: string, now = new Date()): Promise<Replayed> {
  checkReplayable(queue, file)
  return moveAndMark(queue, ledger, file, now)
}

/**
 * The move and the ledger update of a replay, without the checks of `replayRefusal` (exported
 * for tests of the race). With `maxReplays`, a file the ledger has logged that many replays of
 * is refused, decided inside the same transaction (see `LedgerPort.recordReplay`), so two
 * concurrent bulk replays cannot both pass the limit. Unless `isForced`, a format error's file
 * whose bytes are unchanged since it failed is refused, its bytes read inside the transaction
 * just before the rename.
 */
export async function moveAndMark(
  queue: Queue,
  ledger: LedgerPort,
  file: string,
  now: Date,
  maxReplays = Number.POSITIVE_INFINITY,
  isForced = false,
): Promise<Replayed> {
  const failure = await ledger.unreplayedFailure(file)
  const move = () => {
    const unchanged = isForced ? undefined : readUnchanged(queue, file, failure)
    if (unchanged !== undefined) throw refusal(file, unchanged)
    moveBack(queue, file, now)
  }
  const r = await ledger.recordReplay(file, now.toISOString(), move, maxReplays)
  if (r.kind === "too-often") throw refusal(file, tooOften(r.count, maxReplays))
  return { file, reason: failure?.reason, isRecordMarked: r.isRecordMarked }
}

/** `unchangedRefusal` of `error/FILE`; undefined when it is gone (the rename then refuses it). */
export function readUnchanged(queue: Queue, file: string, failure: FailureRecord | undefined): string | undefined {
  const path = join(queue.error, file)
  try {
    return unchangedRefusal(path, failure)
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

const defaultMaxReplays = 3

const errorClasses = ["business", "format"] as const satisfies readonly ErrorClass[]

/** `replay`'s options and help. */
export const spec = {
  name: "replay",
  usage:
    "replay.sh [--root DIR] [--] FILE\n" +
    "       replay.sh [--root DIR] [--dry-run] [--max-replays N] [--force]\n" +
    "                 (FILE... | --match GLOB | --reason REASON | --class CLASS | --id MSG_ID | --all)",
  summary: "Moves failed messages from error/ back to inbox/, marking them replayed in the ledger.",
  description:
    "Moves ROOT/error/FILE back to ROOT/inbox/FILE so the next consume retries it, marks its failure\n" +
    "record in the ledger as replayed, and rewrites ROOT/error.csv. FILE is a name directly in\n" +
    "error/ (see error.csv). Refuses, changing nothing, when FILE is a path, is not a regular file in\n" +
    "error/, or its name is taken in inbox/ or processing/, or when its latest failure is a format\n" +
    "error (parse, missing-field, ...) and the file is unchanged since: it would fail again; fix it\n" +
    "in error/ first, or pass --force. The move never replaces a file, and sets the file's mtime to\n" +
    "the replay's time, so its age in inbox/ counts from the replay.\n\n" +
    "Bulk replay (several FILEs, --match, --reason, --class, --id, --all, or any of the options below)\n" +
    "replays each selected file the same way, one ledger transaction per file, refusing (and leaving\n" +
    "in error/) those that fail the checks or have been replayed --max-replays times already; the\n" +
    "others still move. It lists the names it moved on stdout, one per line, rewrites the reports\n" +
    "once at the end, and exits 1 if any selected file was refused. A selection that finds nothing\n" +
    "exits 0, except --id: a msg_id that no file in error/ carries exits 1, changing nothing.",
  arguments: [{ name: "FILE", help: "name of a file in error/ (use -- before a name that starts with -)" }],
  options: {
    root,
    ledger,
    match: text(
      "GLOB",
      "every entry directly in error/ whose name matches GLOB; quote it, repeat it for several globs, and put \\ before any of *?[]{}()! to match it literally",
      { multiple: true },
    ),
    reason: text(
      "REASON",
      "every file in error/ whose latest unreplayed failure has REASON (parse, missing-field, invalid-field, ...; see error.csv)",
    ),
    class: choice(
      "CLASS",
      errorClasses,
      "every file in error/ whose latest unreplayed failure is of CLASS: business (handler, beyond-horizon, poison, expired) or format (needs corrected files or --force)",
    ),
    id: text("MSG_ID", "the files in error/ whose JSON has this msg_id; exit 1, changing nothing, when there is none"),
    all: flag("every entry in error/"),
    "dry-run": { ...dryRun, help: "list on stdout what would move, change nothing (exit code as a real run)" },
    "max-replays": integer("refuse a file the ledger has logged N replays of already", {
      fallback: String(defaultMaxReplays),
    }),
    force: flag("replay even past --max-replays, and a format error's file unchanged since it failed"),
  },
} satisfies CommandSpec

/** `replay FILE`: send one failed message back to inbox/. Exit 1 when refused (nothing changed). */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values, positionals }) => {
    const isBulk =
      positionals.length > 1 ||
      values.match !== undefined ||
      values.reason !== undefined ||
      values.class !== undefined ||
      values.id !== undefined ||
      values.all ||
      values["dry-run"] ||
      values["max-replays"] !== undefined ||
      values.force
    const url = resolveLedgerUrl(values.ledger)
    if (isBulk) return replayBulk(values, positionals, url)
    const [file] = positionals
    if (file === undefined) throw new SpoolError("usage", "missing FILE (the name of a file in error/)")
    const queue = openQueue(resolveRoot(values.root))
    // Every refusal that can be decided without the ledger is decided before opening it.
    checkReplayable(queue, file)
    const ledger = await openLedger(queue, { url })
    try {
      const r = await replayFile(queue, ledger, file)
      await writeReports(queue, ledger)
      await writeErr(`replay: ${movedLine(r)}; run consume to process it\n`)
      return ExitCode.ok
    } finally {
      await ledger.close()
    }
  })
}

function movedLine(r: Replayed): string {
  return (
    `moved ${quoteName(`error/${r.file}`)} back to ${quoteName(`inbox/${r.file}`)}` +
    (r.isRecordMarked
      ? ` (failed with ${r.reason ?? "unknown"}; record marked replayed)`
      : " (the ledger had no failure record for it; the replay is logged)")
  )
}

type ReplayValues = Partial<Pick<Values<typeof spec.options>, "match" | "reason" | "class" | "id" | "all">>

/** Turns the options into one selection, or a usage error. */
export function parseSelection(values: ReplayValues, positionals: readonly string[]): Selection {
  const chosen = [
    positionals.length > 0 ? "FILE" : undefined,
    values.match !== undefined ? "--match" : undefined,
    values.reason !== undefined ? "--reason" : undefined,
    values.class !== undefined ? "--class" : undefined,
    values.id !== undefined ? "--id" : undefined,
    values.all === true ? "--all" : undefined,
  ].filter((c) => c !== undefined)
  if (chosen.length === 0)
    throw new SpoolError(
      "usage",
      "missing FILE (the name of a file in error/), --match GLOB, --reason REASON, --class CLASS, --id MSG_ID or --all",
    )
  if (chosen.length > 1)
    throw new SpoolError("usage", `give one way of choosing files, not ${chosen.join(" and ")} together`)
  if (values.match !== undefined) {
    for (const p of values.match)
      if (p === "" || p.includes("/") || p.includes("\0"))
        throw new SpoolError(
          "usage",
          `--match takes a glob of names directly in error/, without a path, not ${quoteName(p)}`,
        )
    return { kind: "match", patterns: values.match }
  }
  if (values.reason !== undefined) {
    if (values.reason === "") throw new SpoolError("usage", "--reason takes a failure reason such as missing-field")
    return { kind: "reason", reason: values.reason }
  }
  if (values.class !== undefined) {
    const errorClass = errorClasses.find((c) => c === values.class)
    if (errorClass === undefined) throw new SpoolError("usage", "--class takes business or format")
    return { kind: "class", errorClass }
  }
  if (values.id !== undefined) {
    if (values.id === "") throw new SpoolError("usage", "--id takes a message's msg_id")
    return { kind: "id", msgId: values.id }
  }
  if (values.all === true) return { kind: "all" }
  return { kind: "names", names: positionals }
}

async function replayBulk(
  values: Values<typeof spec.options>,
  positionals: readonly string[],
  url: string | undefined,
): Promise<number> {
  const selection = parseSelection(values, positionals)
  const maxReplays = values["max-replays"] ?? defaultMaxReplays
  const isDryRun = values["dry-run"]
  const queue = openQueue(resolveRoot(values.root))
  await checkRootLedger(queue, url)
  // Opened at first need: a run that selects nothing or refuses everything creates no ledger, and
  // neither does a selection by reason nor a dry run (no ledger yet: no reasons, no replays).
  let ledger: LedgerPort | undefined
  let existing: Promise<LedgerPort | undefined> | undefined
  const existingLedger = (): Promise<LedgerPort | undefined> => {
    existing ??= openExistingLedger(queue, { url, readonly: isDryRun }).then((l) => (ledger = l))
    return existing
  }
  const useLedger = async (): Promise<LedgerPort | undefined> => {
    const found = await existingLedger()
    if (found !== undefined || isDryRun) return found
    ledger ??= await openLedger(queue, { url })
    return ledger
  }
  let moved = 0
  try {
    const files = await selectFiles(queue, selection, existingLedger)
    if (files.length === 0 && selection.kind === "id") {
      // A msg_id is a claim that such a message failed: one that is nowhere in error/ is a mistake.
      await writeErr(
        `replay: no file in ${queue.error}/ has msg_id ${JSON.stringify(selection.msgId)} ` +
          "(a message that was processed is in done/, not error/); nothing was changed\n",
      )
      return ExitCode.check
    }
    if (files.length === 0) {
      await writeErr(`replay: ${describeSelection(selection)} selects no file in error/; nothing was changed\n`)
      return ExitCode.ok
    }
    const outcomes = await replayFiles(
      queue,
      useLedger,
      files,
      { maxReplays, isForced: values.force === true, isDryRun, now: new Date() },
      async (o) => {
        if (o.kind === "refused") await writeErr(`replay: refused ${quoteName(o.file)}: ${o.why}\n`)
        else {
          if (o.kind === "moved") {
            moved++
            await writeErr(`replay: ${movedLine(o.replayed)}\n`)
          }
          await writeOut(`${quoteName(o.file)}\n`)
        }
      },
    )
    const refused = outcomes.filter((o) => o.kind === "refused").length
    const of = `of ${files.length} selected file${files.length === 1 ? "" : "s"}`
    await writeErr(
      isDryRun
        ? `replay: dry run: ${files.length - refused} ${of} would move back to inbox/, ${refused} would be refused; nothing was changed\n`
        : `replay: moved ${moved} ${of} back to inbox/, refused ${refused}` +
            (moved > 0 ? "; run consume to process them\n" : "; nothing was changed\n"),
    )
    return refused > 0 ? ExitCode.check : ExitCode.ok
  } finally {
    try {
      // Once for the whole run, and also when it stopped on a runtime failure after some moves.
      if (moved > 0 && ledger !== undefined) await writeReports(queue, ledger)
    } finally {
      await ledger?.close()
    }
  }
}

function describeSelection(selection: Selection): string {
  switch (selection.kind) {
    case "names":
      return "the given names"
    case "all":
      return "--all"
    case "reason":
      return `--reason ${selection.reason}`
    case "class":
      return `--class ${selection.errorClass}`
    case "id":
      return `--id ${JSON.stringify(selection.msgId)}`
    case "match":
      return selection.patterns.map((p) => `--match ${quoteName(p)}`).join(" ")
  }
}
