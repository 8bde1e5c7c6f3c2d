import fs from "node:fs"
import { join } from "node:path"
import { type CommandSpec, choice, dryRun, duration, ledger, root, runCommand, text, type Values } from "@spool/cli"
import {
  checkRootLedger,
  type DeletionDir,
  ExitCode,
  errnoOf,
  type LedgerPort,
  openExistingLedger,
  openQueue,
  type Queue,
  quoteName,
  reasonNames,
  resolveLedgerUrl,
  resolveRoot,
  SpoolError,
  unlinkDurably,
  wallClock,
  writeReports,
} from "@spool/core/engine"
import { writeErr, writeOut } from "./_io.ts"
import { selectFiles } from "./replay-bulk.ts"
import { errorClasses, parseSelection } from "./replay-selection.ts"

/** `delete`'s options and help. */
export const spec = {
  name: "delete",
  usage:
    "bun run delete [--root DIR] [--ledger URL] [--dry-run] [--older-than DURATION]\n" +
    "               (FILE... | --match GLOB | --reason REASON | --class CLASS)",
  summary: "Throws failed or deferred messages away, recording each deletion in the ledger.",
  description:
    "Removes files from ROOT/error/ for good (postsuper -d): a FILE is a name in error/ (see error.csv),\n" +
    "or deferred/NAME for a message waiting in deferred/, which is never taken by a selection. Each\n" +
    "file is unlinked in the ledger transaction that records its deletion: its failure is closed, so\n" +
    "stats, the spool_open_failures metric and error.csv stop counting it; a deferred file's next\n" +
    "attempt is forgotten, so it never comes back. --older-than keeps the files that entered error/\n" +
    "(or deferred/) more recently than DURATION ago. Deleted names are listed on stdout, one per line,\n" +
    "and the reports are rewritten once at the end.\n\n" +
    "A file is refused, and left as it is, when it is not in error/ (or deferred/), is a directory, or\n" +
    "is a deferred message a consumer is picking up right now; the others are still deleted, and the\n" +
    "run exits 1. A file removed by hand is no longer counted either (stats count the files in error/),\n" +
    "but its failure stays open in the ledger until delete names it.",
  arguments: [
    { name: "FILE", help: "name of a file in error/, or deferred/NAME (use -- before a name that starts with -)" },
  ],
  options: {
    root,
    ledger,
    match: text("GLOB", "every entry directly in error/ whose name matches GLOB (quote it; repeat it for several)", {
      multiple: true,
    }),
    reason: choice("REASON", reasonNames, "every file in error/ whose open failure has REASON (see error.csv)"),
    class: choice("CLASS", errorClasses, "every file in error/ whose open failure is of CLASS"),
    "older-than": duration("only files that entered error/ or deferred/ longer than DURATION ago, e.g. 30d", {
      example: "30d",
    }),
    "dry-run": { ...dryRun, help: "list on stdout what would be deleted, say what would be refused, change nothing" },
  },
  exitCodes: [0, 1, 2, 3],
  examples: [
    { args: "--root /srv/spool/orders evt-broken-0001.json", does: "throw one failed file away" },
    {
      args: "--root /srv/spool/orders --reason parse --older-than 30d --dry-run",
      does: "say which old parse failures would go",
    },
    { args: "--root /srv/spool/orders deferred/evt-0042.json", does: "give up on a message waiting in deferred/" },
  ],
} satisfies CommandSpec

type DeleteValues = Values<typeof spec.options>

/** One file a run was asked to delete: which directory, and its name there. */
interface Target {
  readonly dir: DeletionDir
  readonly name: string
}

/** What happened to one target. */
type Outcome =
  | { readonly target: Target; readonly kind: "deleted" | "would-delete" | "too-young"; readonly wasGone?: boolean }
  | { readonly target: Target; readonly kind: "refused"; readonly why: string }

/** `delete FILE...`: throw messages away. Exit 1 when a file was refused (that file unchanged). */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values, positionals, quiet }) => {
    const url = resolveLedgerUrl(values.ledger)
    const queue = openQueue(resolveRoot(values.root))
    await checkRootLedger(queue, url)
    const isDryRun = values["dry-run"]
    // Never a new ledger: a root with none has recorded nothing about its files to close.
    const ledger = await openExistingLedger(queue, { url, readonly: isDryRun })
    try {
      const targets = await chooseTargets(queue, values, positionals, ledger)
      if (targets.length === 0) {
        if (!quiet) await writeErr("delete: the selection selects no file in error/; nothing was changed\n")
        return ExitCode.ok
      }
      const outcomes = await deleteTargets(queue, ledger, targets, isDryRun, values["older-than"])
      for (const o of outcomes) await writeOutcome(o, quiet)
      const n = (kind: Outcome["kind"]) => outcomes.filter((o) => o.kind === kind).length
      const refused = n("refused")
      if (n("deleted") > 0 && ledger !== undefined) await writeReports(queue, ledger)
      if (!quiet || refused > 0) {
        const of = `of ${targets.length} selected file${targets.length === 1 ? "" : "s"}`
        const young = n("too-young") > 0 ? `, kept ${n("too-young")} younger than --older-than` : ""
        await writeErr(
          isDryRun
            ? `delete: dry run: ${n("would-delete")} ${of} would be deleted${young}, ${refused} refused; nothing was changed\n`
            : `delete: deleted ${n("deleted")} ${of}${young}, refused ${refused}\n`,
        )
      }
      return refused > 0 ? ExitCode.check : ExitCode.ok
    } finally {
      await ledger?.close()
    }
  })
}

/** The files named or selected: a selection takes names in error/ only; a FILE may say deferred/. */
async function chooseTargets(
  queue: Queue,
  values: DeleteValues,
  positionals: readonly string[],
  ledger: LedgerPort | undefined,
): Promise<Target[]> {
  const selection = parseSelection(values, positionals, "delete")
  if (selection.kind !== "names") {
    const names = await selectFiles(queue, selection, () => ledger)
    return names.map((name) => ({ dir: "error", name }))
  }
  return [...new Set(positionals)].map(targetOf)
}

/** `deferred/NAME` names a deferred file, `error/NAME` or a bare NAME a file in error/. */
function targetOf(file: string): Target {
  const slash = file.indexOf("/")
  const dir = slash < 0 ? "error" : file.slice(0, slash)
  const name = slash < 0 ? file : file.slice(slash + 1)
  if (dir === "error" || dir === "deferred") return { dir, name }
  return { dir: "error", name: file }
}

async function deleteTargets(
  queue: Queue,
  ledger: LedgerPort | undefined,
  targets: readonly Target[],
  isDryRun: boolean,
  olderThanMs: number | undefined,
): Promise<Outcome[]> {
  const now = wallClock()
  const outcomes: Outcome[] = []
  for (const target of targets) {
    const why = refusalOf(queue, target)
    // Removed by hand: its failure, still open in the ledger, is what delete has left to close.
    const wasGone = why === absent && target.dir === "error" && (await ledger?.unreplayedFailure(target.name))
    if (why !== undefined && !wasGone) {
      const missing = `there is no such file in ${target.dir}/${elsewhere(queue, target)}`
      outcomes.push({ target, kind: "refused", why: why === absent ? missing : why })
    } else if (!wasGone && olderThanMs !== undefined && now - (await enteredAt(queue, ledger, target)) < olderThanMs)
      outcomes.push({ target, kind: "too-young" })
    else if (isDryRun) outcomes.push({ target, kind: "would-delete", wasGone: Boolean(wasGone) })
    else outcomes.push(await deleteOne(queue, ledger, target, new Date(now).toISOString(), Boolean(wasGone)))
  }
  return outcomes
}

/**
 * Crash safety: the file is unlinked, and the unlink fsynced, inside the transaction that records
 * the deletion, before its COMMIT. A crash before the unlink rolls the record back and leaves
 * the file; a crash between the unlink and the COMMIT leaves the file gone with its failure open,
 * which is a file removed by hand: not counted (stats and error.csv read error/), closed by the
 * next delete that names it. So the ledger never says a file was deleted that is still there.
 */
async function deleteOne(
  queue: Queue,
  ledger: LedgerPort | undefined,
  target: Target,
  now: string,
  wasGone = false,
): Promise<Outcome> {
  const dir = target.dir === "error" ? queue.error : queue.deferred
  const gone = new SpoolError("refused", `it is no longer in ${target.dir}/`)
  const remove = () => {
    if (wasGone) return
    try {
      unlinkDurably(dir, target.name)
    } catch (error) {
      // Gone since the check (another delete, a replay, a pickup): rolled back, nothing recorded.
      throw errnoOf(error) === "ENOENT" ? gone : error
    }
  }
  try {
    if (ledger === undefined) {
      // No ledger yet: it has recorded nothing about the file, so there is nothing to close.
      remove()
      return { target, kind: "deleted", wasGone }
    }
    const r = await ledger.recordDeletion(target.name, target.dir, now, remove)
    if (r.kind === "in-use")
      return { target, kind: "refused", why: "a consumer is taking it up for its next attempt right now" }
    return { target, kind: "deleted", wasGone }
  } catch (error) {
    if (error === gone) return { target, kind: "refused", why: gone.message }
    throw error
  }
}

/** The refusal of a name not in its directory, which a failure still open in the ledger turns into its closing. */
const absent = "absent"

function refusalOf(queue: Queue, { dir, name }: Target): string | undefined {
  if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0"))
    return `give a name directly in error/, or deferred/NAME, not ${quoteName(name)}`
  let st: fs.Stats
  try {
    st = fs.lstatSync(join(dir === "error" ? queue.error : queue.deferred, name))
  } catch (error) {
    if (errnoOf(error) !== "ENOENT") throw new SpoolError("io", `cannot read ${dir}/${name}: ${String(error)}`)
    return absent
  }
  if (st.isDirectory()) return `${dir}/ holds a directory under that name; inspect it and remove it by hand`
  return undefined
}

function elsewhere(queue: Queue, { dir, name }: Target): string {
  return dir === "error" && fs.existsSync(join(queue.deferred, name))
    ? ` (it is in deferred/: give deferred/${name})`
    : ""
}

/** When the file entered its directory: the ledger's failure or deferral time, else its mtime. */
async function enteredAt(queue: Queue, ledger: LedgerPort | undefined, { dir, name }: Target): Promise<number> {
  const recorded =
    dir === "error"
      ? (await ledger?.unreplayedFailure(name))?.failedAt
      : (await ledger?.deferralsAt([name]))?.get(name)?.firstDeferredAt
  if (recorded !== undefined) return Date.parse(recorded)
  return fs.lstatSync(join(dir === "error" ? queue.error : queue.deferred, name)).mtimeMs
}

async function writeOutcome(o: Outcome, quiet: boolean): Promise<void> {
  const path = quoteName(`${o.target.dir}/${o.target.name}`)
  switch (o.kind) {
    case "refused":
      return writeErr(`delete: refused ${path}: ${o.why}\n`)
    case "deleted":
      if (quiet) return
      if (o.wasGone) await writeErr(`delete: ${path} was already gone; its failure is closed\n`)
      return writeOut(`${path}\n`)
    case "would-delete":
      return writeOut(`${path}\n`)
    case "too-young":
      return
  }
}
