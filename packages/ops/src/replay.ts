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
  ExitCode,
  type LedgerPort,
  openExistingLedger,
  openLedger,
  openQueue,
  type Queue,
  quoteName,
  reasonNames,
  resolveLedgerUrl,
  resolveRoot,
  SpoolError,
  writeReports,
} from "@spool/core/engine"
import { writeErr, writeOut } from "./_io.ts"
import { type BulkOutcome, replayFiles, type Selection, selectFiles } from "./replay-bulk.ts"
import { checkReplayable, type Replayed, refusal, replayFile } from "./replay-move.ts"
import { publishAndMark, type ReplayTarget, type SourceHandle, sourceHandle, sourceRefusal } from "./replay-publish.ts"
import { errorClasses, parseSelection } from "./replay-selection.ts"
import { type Repeat, repeatWarning, skippedLine } from "./replay-unchanged.ts"

export type { BulkOptions, BulkOutcome, LedgerSource, Selection } from "./replay-bulk.ts"
export { replayFiles, selectFiles } from "./replay-bulk.ts"
export type { MoveOutcome, RepeatPolicy, Replayed } from "./replay-move.ts"
export { checkReplayable, checkReplayName, moveAndMark, replayFile } from "./replay-move.ts"
export { parseSelection } from "./replay-selection.ts"
export type { Repeat } from "./replay-unchanged.ts"

const defaultMaxReplays = 3

/** `replay`'s options and help. */
export const spec = {
  name: "replay",
  usage:
    "replay.sh [--root DIR] [--source URL | --to inbox] [--] FILE\n" +
    "       replay.sh [--root DIR] [--dry-run] [--max-replays N] [--include-unchanged]\n" +
    "                 (FILE... | --match GLOB | --reason REASON | --class CLASS | --id MSG_ID | --all)",
  summary: "Moves failed messages from error/ back to inbox/, marking them replayed in the ledger.",
  description:
    "Moves ROOT/error/FILE back to ROOT/inbox/FILE so the next consume retries it, marks its failure\n" +
    "record in the ledger as replayed, logs the replay and rewrites ROOT/error.csv. FILE is a name\n" +
    "directly in error/ (see error.csv), or error/NAME. Every named FILE that is a regular file in\n" +
    "error/ moves. It is refused, changing nothing, only when it is another path, is not a regular\n" +
    "file in error/, or its name is taken in inbox/ or processing/. A FILE that will fail the same way moves too, with a warning: a\n" +
    "format error (parse, missing-field, ...) whose file is unchanged since it failed, or a file the\n" +
    "ledger has logged --max-replays replays of; fix it at the source, or correct it in error/ first.\n" +
    "The move never replaces a file, and sets the file's mtime to the replay's time, so its age in\n" +
    "inbox/ counts from the replay.\n\n" +
    "A selection (--match, --reason, --class, --id, --all) replays each file it selects the same way,\n" +
    "one ledger transaction per file, but skips the files that would fail the same way and says how\n" +
    "many and why in one line: a skip is not a failure. --include-unchanged takes them too, each with\n" +
    "its warning. Several FILEs or a selection list the names moved on stdout, one per line, rewrite\n" +
    "the reports once at the end, and exit 1 if any file was refused (the others still move). A\n" +
    "selection that finds nothing exits 0, except --id: a msg_id that no file in error/ carries exits\n" +
    "1, changing nothing.\n\n" +
    "A file a broker delivered (consume --source; the ledger keeps its origin) is published back to its\n" +
    "queue or stream instead, with --source URL: the URL it came from with its password, which the\n" +
    "ledger does not keep. It leaves error/ only once the broker has confirmed it, in the transaction\n" +
    "that marks its replay; a broker that does not confirm leaves it in error/ (exit 1). Without\n" +
    "--source it is refused, saying the URL to give. --to inbox puts it into the root's inbox/ instead.",
  arguments: [{ name: "FILE", help: "name of a file in error/ (use -- before a name that starts with -)" }],
  options: {
    root,
    ledger,
    match: text(
      "GLOB",
      "every entry directly in error/ whose name matches GLOB; quote it, repeat it for several globs, and put \\ before any of *?[]{}()! to match it literally",
      { multiple: true },
    ),
    reason: choice(
      "REASON",
      reasonNames,
      "every file in error/ whose latest unreplayed failure has REASON (parse, missing-field, invalid-field, ...; see error.csv)",
    ),
    class: choice(
      "CLASS",
      errorClasses,
      "every file in error/ whose latest unreplayed failure is of CLASS: business (unreadable, handler, beyond-horizon, poison, expired) or format (the unchanged ones are skipped)",
    ),
    id: text("MSG_ID", "the files in error/ whose JSON has this msg_id; exit 1, changing nothing, when there is none"),
    all: flag("every entry in error/"),
    "dry-run": {
      ...dryRun,
      help: "list on stdout what would move, say what would be refused or skipped, change nothing (exit code as a real run)",
    },
    "max-replays": integer(
      "a file the ledger has logged N replays of would fail the same way: a selection skips it, a named FILE moves with a warning",
      { fallback: String(defaultMaxReplays) },
    ),
    "include-unchanged": flag(
      "a selection takes the files that would fail the same way too (unchanged format errors, files past --max-replays)",
    ),
    force: flag("the same as --include-unchanged"),
    source: text(
      "URL",
      "the broker a delivered file came from, with its password (the ledger keeps the URL without it): amqp://USER:PASS@HOST:5672/?queue=QUEUE, nats://HOST:4222/?stream=STREAM&consumer=NAME, redis://HOST:6379/?stream=STREAM&group=GROUP or mqtt://HOST:1883/?topic=FILTER&client=ID",
    ),
    to: choice(
      "inbox",
      ["inbox"],
      "put files a broker delivered into the root's inbox/ instead of publishing them back",
    ),
  },
  exitCodes: [0, 1, 2, 3],
  examples: [
    { args: "--root /srv/spool/orders evt-broken-0001.json", does: "send one corrected file back to inbox/" },
    { args: "--root /srv/spool/orders --reason handler --dry-run", does: "say which handler failures would go back" },
    {
      args: "--root /srv/spool/orders --class business",
      does: "send back every business failure, once its cause is fixed",
    },
  ],
} satisfies CommandSpec

/** `replay FILE`: send failed messages back to inbox/. Exit 1 when a file was refused (that file unchanged). */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values, positionals: given, quiet }) => {
    // error/NAME is NAME, as delete takes it (and as list prints a file's directory beside it).
    const positionals = given.map((p) => (/^error\/[^/]+$/.test(p) ? p.slice("error/".length) : p))
    const isBulk =
      positionals.length > 1 ||
      values.match !== undefined ||
      values.reason !== undefined ||
      values.class !== undefined ||
      values.id !== undefined ||
      values.all ||
      values["dry-run"] ||
      values["max-replays"] !== undefined ||
      values["include-unchanged"] ||
      values.force
    const url = resolveLedgerUrl(values.ledger)
    if (isBulk) return replayBulk(values, positionals, url, quiet)
    const [file] = positionals
    if (file === undefined)
      throw new SpoolError(
        "usage",
        "missing FILE (the name of a file in error/), or a selection: --match, --reason, --class, --id or --all",
      )
    const queue = openQueue(resolveRoot(values.root))
    // Every refusal that can be decided without the ledger is decided before opening it.
    checkReplayable(queue, file)
    const ledger = await openLedger(queue, { url })
    const source = sourceHandle(values.source)
    try {
      const r = await replayOne(queue, ledger, file, targetOf(values), source)
      await writeReports(queue, ledger)
      if (!quiet) await writeErr(`replay: ${movedLine(r)}; run consume to process it\n`)
      if (r.repeat !== undefined) await writeErr(warningLine(r.file, r.repeat))
      return ExitCode.ok
    } finally {
      try {
        await source.close()
      } finally {
        await ledger.close()
      }
    }
  })
}

function targetOf(values: { readonly to?: string | undefined }): ReplayTarget {
  return values.to === "inbox" ? "inbox" : "origin"
}

/** `replay FILE`: to its origin when a broker delivered it (and --to inbox is not given), else to inbox/. */
async function replayOne(
  queue: Queue,
  ledger: LedgerPort,
  file: string,
  target: ReplayTarget,
  source: SourceHandle,
): Promise<Replayed> {
  const origin = target === "inbox" ? undefined : await ledger.failureOrigin(file)
  if (origin === undefined) return replayFile(queue, ledger, file, new Date(), defaultMaxReplays)
  const opened = source.url === undefined ? undefined : await source.open()
  const why = sourceRefusal(origin, opened)
  if (why !== undefined || opened === undefined) throw refusal(file, why ?? "no --source")
  const policy = { maxReplays: defaultMaxReplays, isTakingRepeats: true }
  const r = await publishAndMark(queue, ledger, opened, file, origin, new Date(), policy)
  if (r.kind === "skipped") throw new Error("replayOne: a repeating file was skipped although taken")
  return r.replayed
}

function movedLine(r: Replayed): string {
  const where =
    r.to === undefined
      ? `moved ${quoteName(`error/${r.file}`)} back to ${quoteName(`inbox/${r.file}`)}`
      : `published ${quoteName(`error/${r.file}`)} back to ${r.to}, which confirmed it, and removed it from error/`
  return (
    where +
    (r.isRecordMarked
      ? ` (failed with ${r.reason ?? "unknown"}; record marked replayed)`
      : " (the ledger had no failure record for it; the replay is logged)")
  )
}

function warningLine(file: string, repeat: Repeat): string {
  return `replay: warning: ${quoteName(file)}: ${repeatWarning(repeat)}\n`
}

async function replayBulk(
  values: Values<typeof spec.options>,
  positionals: readonly string[],
  url: string | undefined,
  quiet: boolean,
): Promise<number> {
  const selection = parseSelection(values, positionals)
  const maxReplays = values["max-replays"] ?? defaultMaxReplays
  // Named files are the operator's own choice: they move even when they repeat (with a warning).
  const isTakingRepeats = selection.kind === "names" || values["include-unchanged"] || values.force
  const isDryRun = values["dry-run"]
  const queue = openQueue(resolveRoot(values.root))
  await checkRootLedger(queue, url)
  // Opened at first need: a run that selects nothing or refuses everything creates no ledger, and
  // neither does a selection by reason nor a dry run (no ledger yet: no reasons, no replays).
  let ledger: LedgerPort | undefined
  let existing: Promise<LedgerPort | undefined> | undefined
  const existingLedger = (): Promise<LedgerPort | undefined> => {
    existing ??= openExistingLedger(queue, { url, readonly: isDryRun, isLostLedgerRefused: true }).then(
      (l) => (ledger = l),
    )
    return existing
  }
  const useLedger = async (): Promise<LedgerPort | undefined> => {
    const found = await existingLedger()
    if (found !== undefined || isDryRun) return found
    ledger ??= await openLedger(queue, { url })
    return ledger
  }
  let moved = 0
  const source = sourceHandle(values.source)
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
      if (!quiet)
        await writeErr(`replay: ${describeSelection(selection)} selects no file in error/; nothing was changed\n`)
      return ExitCode.ok
    }
    const outcomes = await replayFiles(
      queue,
      useLedger,
      files,
      { maxReplays, isTakingRepeats, isDryRun, now: new Date(), target: targetOf(values), source },
      async (o) => {
        if (o.kind === "moved") moved++
        await writeOutcome(o, quiet)
      },
    )
    const count = (kind: BulkOutcome["kind"]) => outcomes.filter((o) => o.kind === kind).length
    const refused = count("refused")
    const skipped = outcomes.flatMap((o) => (o.kind === "skipped" ? [o.repeat] : []))
    if (quiet && refused === 0) return ExitCode.ok
    if (skipped.length > 0) await writeErr(`replay: ${skippedLine(skipped, files.length, isDryRun)}\n`)
    const of = `of ${files.length} selected file${files.length === 1 ? "" : "s"}`
    await writeErr(
      isDryRun
        ? `replay: dry run: ${count("would-move")} ${of} would move back to ${publishedOf(outcomes)}inbox/, ${refused} would be refused; nothing was changed\n`
        : `replay: moved ${moved} ${of} back to ${publishedOf(outcomes)}inbox/, refused ${refused}` +
            (moved > 0 ? "; run consume to process them\n" : "; nothing was changed\n"),
    )
    return refused > 0 ? ExitCode.check : ExitCode.ok
  } finally {
    try {
      // Once for the whole run, and also when it stopped on a runtime failure after some moves.
      if (moved > 0 && ledger !== undefined) await writeReports(queue, ledger)
    } finally {
      try {
        await source.close()
      } finally {
        await ledger?.close()
      }
    }
  }
}

/** How many of the moved files went back to their broker, as the summary says it. */
function publishedOf(outcomes: readonly BulkOutcome[]): string {
  const n = outcomes.filter(
    (o) => (o.kind === "moved" && o.replayed.to !== undefined) || (o.kind === "would-move" && o.to !== undefined),
  ).length
  return n === 0 ? "" : `their broker (${n}) or `
}

/** One selected file's lines: stdout lists what moves, stderr says why a file did not or will fail again. */
async function writeOutcome(o: BulkOutcome, quiet: boolean): Promise<void> {
  switch (o.kind) {
    case "refused":
      return writeErr(`replay: refused ${quoteName(o.file)}: ${o.why}\n`)
    case "skipped":
      // Counted in the one summary line instead: a selection may skip hundreds.
      return
    case "moved":
      // Quiet keeps the warning that the file will fail the same way: that needs a person.
      if (!quiet) await writeErr(`replay: ${movedLine(o.replayed)}\n`)
      if (o.replayed.repeat !== undefined) await writeErr(warningLine(o.file, o.replayed.repeat))
      return quiet ? undefined : writeOut(`${quoteName(o.file)}\n`)
    case "would-move":
      if (o.repeat !== undefined) await writeErr(warningLine(o.file, o.repeat))
      // A file a broker delivered says where it goes; the others go to inbox/, as the summary says.
      if (o.to !== undefined)
        await writeErr(`replay: dry run: ${quoteName(o.file)} would be published back to ${o.to}\n`)
      return writeOut(`${quoteName(o.file)}\n`)
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
