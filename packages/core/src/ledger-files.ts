// The SQLite ledger's files on disk, as Ledger.open judges them before SQLite opens them:
// links it refuses, and the history that forbids starting a new ledger.
import fs from "node:fs"
import { basename, dirname, join, resolve } from "node:path"
import { errnoOf, SpoolError } from "./errors.ts"
import { scanDir } from "./queue.ts"

/** The file that binds a queue root to a PostgreSQL ledger: the root's id in it. */
export const rootIdFile = ".spool-root-id"

/** SQLite's two companions of a ledger in WAL mode, and what each holds. */
const companions = [
  {
    suffix: "-wal",
    what: "SQLite's write-ahead log (transactions committed but not yet copied into the ledger: never remove it)",
  },
  {
    suffix: "-shm",
    what: "SQLite's WAL index (the shared-memory file every connection to the ledger maps; it holds nothing durable)",
  },
] as const

/**
 * Refuses a ledger whose file, -wal or -shm is a symbolic link: SQLite follows it, so the
 * ledger, its log or its index would be written outside the queue root.
 */
export function refuseLinks(path: string): void {
  for (const p of [path, ...companions.map((c) => path + c.suffix)]) {
    if (!lstatOrUndefined(p)?.isSymbolicLink()) continue
    let target = "an unreadable target"
    try {
      target = resolve(dirname(p), fs.readlinkSync(p))
    } catch {}
    throw new SpoolError(
      "unsafe-ledger",
      `${p} is a symbolic link (to ${target}); spool keeps its ledger files in the queue root itself and does not follow links for them, since SQLite would write through the link, outside the root. Nothing was opened. With no consumer running, put the file itself in place of the link (mv -T ${target} ${p}), or remove the link if its target does not exist`,
    )
  }
}

/** What shows that a queue root was consumed before: a file in done/ or error/, or its PostgreSQL binding. */
export type History =
  | { readonly kind: "files"; readonly dir: "done" | "error"; readonly name: string }
  | { readonly kind: "postgres" }

/** The first sign that `root` has been consumed before, or undefined for a queue with no history. */
export function historyOf(root: string): History | undefined {
  if (lstatOrUndefined(join(root, rootIdFile)) !== undefined) return { kind: "postgres" }
  for (const dir of ["done", "error"] as const) {
    try {
      // One entry is enough, and scanDir reads no more of a directory of a million files.
      for (const e of scanDir(join(root, dir), 64)) return { kind: "files", dir, name: e.name }
    } catch {}
  }
  return undefined
}

/**
 * The refusal to start a new ledger at `path` (absent, empty, or a database without spool's
 * tables) beside a root with history: the new ledger would hold none of the deduplication keys.
 */
export function newLedgerRefusal(path: string, state: "absent" | "empty" | "unmigrated", history: History): SpoolError {
  const root = dirname(path)
  const what = { absent: "does not exist", empty: "is empty (0 bytes)", unmigrated: "holds no spool tables" }[state]
  const override = "run consume once with --new-ledger (in the library: isNewLedgerAllowed: true)"
  if (history.kind === "postgres")
    return new SpoolError(
      "unsafe-ledger",
      `refusing to start a SQLite ledger: ${path} ${what}, and this root (${root}) was consumed into PostgreSQL (${join(root, rootIdFile)} is its id there), where its deduplication keys are: set SPOOL_LEDGER_URL or pass --ledger with that database's postgres:// URL. Nothing was created or changed. To move this root to a new, empty SQLite ledger on purpose, ${override}`,
    )
  return new SpoolError(
    "unsafe-ledger",
    `refusing to start a new ledger: ${path} ${what}, but ${join(root, history.dir)}/ holds files (${JSON.stringify(history.name)} among them), so an earlier ledger recorded this queue's messages, and a new one would have none of its deduplication keys: a redelivery of a message already processed would be processed again. Nothing was created or changed. Restore ${basename(path)} from a backup, with no consumer running; or, if starting over with an empty ledger is intended, ${override}`,
  )
}

function lstatOrUndefined(path: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(path)
  } catch (error) {
    if (errnoOf(error) === "ENOENT" || errnoOf(error) === "ENOTDIR") return undefined
    throw error
  }
}
