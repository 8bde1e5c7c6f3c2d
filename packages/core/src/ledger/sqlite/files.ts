// The SQLite ledger's files on disk, as SqliteLedger.open judges them before and after SQLite opens
// them: links it refuses, the history that forbids a new ledger, who may write which file, and
// whether the pages are sound.
import type { Database } from "bun:sqlite"
import fs from "node:fs"
import { basename, dirname, join, resolve } from "node:path"
import { errnoOf, SpoolError } from "../../errors.ts"
import { accountOf, ownerOf } from "../../queue/accounts.ts"
import { scanDir } from "../../queue/scan.ts"
import { bindingFile, rootIdFile } from "../binding.ts"

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
 * Refuses a ledger whose file, -wal or -shm is a symbolic link (SQLite follows it, so the
 * ledger, its log or its index would be written outside the queue root) or anything else that
 * is not a regular file.
 */
export function refuseLinks(path: string): void {
  for (const p of [path, ...companions.map((c) => path + c.suffix)]) {
    const st = lstatOrUndefined(p)
    if (st === undefined || st.isFile()) continue
    // A device would have the ledger written onto it, outside the root; a directory or a FIFO
    // would fail later with an error that blames the disk or the permissions.
    if (!st.isSymbolicLink())
      throw new SpoolError(
        "unsafe-ledger",
        `${p} is ${kindOfEntry(st)}, not a file; spool keeps its ledger in regular files in the queue root. Nothing was opened. With no consumer running, move it aside and restore the ledger from a backup`,
      )
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

/**
 * What shows that a queue root was consumed before: a file in done/ or error/ or archived by
 * compact, its PostgreSQL binding, or the record of its binding to a SQLite ledger, which a
 * writer makes only once that ledger exists (so it outlives the files a retention job removes),
 * and `setup --rebind` on purpose, after which the first consume says --new-ledger.
 */
type History =
  | { readonly kind: "files"; readonly dir: "done" | "error" | "archive"; readonly name: string }
  | { readonly kind: "postgres" }
  | { readonly kind: "bound" }

/** The first sign that `root` has been consumed before, or undefined for a queue with no history. */
export function historyOf(root: string): History | undefined {
  if (lstatOrUndefined(join(root, rootIdFile)) !== undefined) return { kind: "postgres" }
  for (const dir of ["done", "error", "archive"] as const) {
    try {
      // One entry is enough, and scanDir reads no more of a directory of a million files.
      for (const e of scanDir(join(root, dir), 64)) return { kind: "files", dir, name: e.name }
    } catch {}
  }
  if (lstatOrUndefined(bindingFile(root)) !== undefined) return { kind: "bound" }
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
  const evidence =
    history.kind === "bound"
      ? `${bindingFile(root)} records that this root is bound to its SQLite ledger (made by an earlier run, or bound by setup --rebind)`
      : `${join(root, history.dir)}/ holds files (${JSON.stringify(history.name)} among them)`
  return new SpoolError(
    "unsafe-ledger",
    `refusing to start a new ledger: ${path} ${what}, but ${evidence}, so an earlier ledger ${history.kind === "bound" ? "may have recorded" : "recorded"} this queue's messages, and a new one would have none of its deduplication keys: a redelivery of a message already processed would be processed again. Nothing was created or changed. Restore ${basename(path)} from a backup, with no consumer running; or, if starting over with an empty ledger is intended, ${override}`,
  )
}

/**
 * Why this process cannot write the ledger at `path`: the one file (or the root directory)
 * in the way, with its owner, its mode and what to do. Undefined when access is not the cause.
 */
export function describeAccess(path: string): string | undefined {
  const me = accountOf(process.getuid?.() ?? -1)
  const running = `this process, running as ${me.text}`
  // Modes do not stop root: only an immutable file or a read-only mount does.
  const isRoot = process.getuid?.() === 0
  const forRoot = (p: string) =>
    `its mode would allow root, so it is immutable (lsattr shows i) or on a read-only mount: restore write access with chattr -i ${p}, or mount it read-write`
  const chown = (p: string) => `give this user write access to it (chown ${me.chown} ${p} && chmod 0640 ${p})`
  const dir = dirname(path)
  const dirStat = lstatOrUndefined(dir)
  if (dirStat !== undefined && !isAccessible(dir, fs.constants.W_OK | fs.constants.X_OK))
    return `the queue root ${dir} is read-only for ${running}: it is ${ownerOf(dirStat)}; ${isRoot ? forRoot(dir) : "give this user write access to it, or run the consumer as its owner"}. SQLite must create the ledger's -wal and -shm files there`
  const ledger = lstatOrUndefined(path)
  if (ledger !== undefined && !isAccessible(path, fs.constants.R_OK | fs.constants.W_OK))
    return `the ledger ${path} is read-only for ${running}: it is ${ownerOf(ledger)}; ${isRoot ? forRoot(path) : `${chown(path)}, or run the consumer as its owner`}`
  for (const c of companions) {
    const p = path + c.suffix
    const st = lstatOrUndefined(p)
    if (st === undefined || isAccessible(p, fs.constants.R_OK | fs.constants.W_OK)) continue
    const remedy = isRoot
      ? `; ${forRoot(p)}`
      : `, most likely left by an earlier run as another user. With no consumer running on this root, ${chown(p)}` +
        (c.suffix === "-shm" ? `, or remove it (rm ${p}: SQLite rebuilds it at the next open)` : "")
    return `the ledger ${path} is writable, but ${p}, ${c.what}, is read-only for ${running}, so SQLite can only read the ledger: it is ${ownerOf(st)}${remedy}`
  }
  return undefined
}

/**
 * Whether the ledger's -wal file holds anything before it is opened: its last writer did not
 * close cleanly, or one is open now. An empty -wal is what a read-only connection leaves (it may
 * not delete it): nothing was written there, and it calls for no check.
 */
export function isLeftOpen(path: string): boolean {
  return (lstatOrUndefined(`${path}-wal`)?.size ?? 0) > 0
}

/** Runs `PRAGMA quick_check` (every page, not index against table) and throws when it reports damage. */
export function quickCheck(db: Database, path: string): void {
  const problems = (db.query("PRAGMA quick_check(20)").all() as { quick_check: string }[])
    .flatMap((r) => r.quick_check.split("\n"))
    .filter((p) => p !== "ok" && !p.startsWith("*** in database"))
  if (problems.length === 0) return
  const more = problems.length > 3 ? `; and ${problems.length - 3} more` : ""
  throw damaged(path, `PRAGMA quick_check reported: ${problems.slice(0, 3).join("; ")}${more}`)
}

/** The error for a ledger whose pages SQLite finds damaged. */
export function damaged(path: string, detail: string, options?: ErrorOptions): SpoolError {
  const root = dirname(path)
  return new SpoolError(
    "ledger",
    `the ledger ${path} is damaged (${detail}). Stop every consumer on this root, run bun run verify --root ${root} to see what else is wrong, and restore ${basename(path)} from a backup (move the damaged ${basename(path)}, -wal and -shm aside together first)`,
    options,
  )
}

function kindOfEntry(st: fs.Stats): string {
  if (st.isDirectory()) return "a directory"
  if (st.isBlockDevice()) return "a block device"
  if (st.isCharacterDevice()) return "a character device"
  if (st.isFIFO()) return "a FIFO"
  if (st.isSocket()) return "a socket"
  return "not a regular file"
}

function lstatOrUndefined(path: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(path)
  } catch (error) {
    if (errnoOf(error) === "ENOENT" || errnoOf(error) === "ENOTDIR") return undefined
    throw error
  }
}

function isAccessible(path: string, mode: number): boolean {
  try {
    fs.accessSync(path, mode)
    return true
  } catch {
    return false
  }
}
