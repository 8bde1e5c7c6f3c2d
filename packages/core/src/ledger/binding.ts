// A queue root knows its ledger. The first command that gives a root a ledger records which one
// in ROOT/.spool/ledger, and every later command opens that ledger or refuses: a root bound to
// PostgreSQL run without its URL (a cron line, a unit missing one variable) must not start an
// empty SQLite ledger beside it, where every redelivery would be new; a URL naming another
// database must not deduplicate the root against keys that are not its own.
import fs from "node:fs"
import { join } from "node:path"
import { SpoolError } from "../errors.ts"
import { createFileAtomic, writeFileAtomic } from "../queue/atomic-write.ts"
import { fsyncDirAt } from "../queue/files.ts"
import { notADirectory } from "../queue/root.ts"

/** The ledger a root is bound to. */
export type Binding =
  | { readonly backend: "sqlite" }
  | {
      readonly backend: "postgres"
      /** The ledger's id (its spool_ledger row); undefined for a root bound before ledgers had one. */
      readonly ledgerId: string | undefined
      /** Where it was, for messages: the URL without its password. */
      readonly where: string | undefined
    }

/** A root's binding, and whether it is recorded in ROOT/.spool/ledger or inferred from older files. */
export interface RootBinding {
  readonly binding: Binding
  readonly isRecorded: boolean
}

/** The file that holds a queue root's id in a PostgreSQL ledger (see `rootId` in open.ts). */
export const rootIdFile = ".spool-root-id"

/** Where a root's binding is recorded. */
export const bindingFile = (root: string): string => join(root, ".spool", "ledger")

/**
 * The ledger `root` is bound to: as recorded, else as a root from before the record shows it
 * (a `ledger.db`: SQLite; a `.spool-root-id` and no `ledger.db`: PostgreSQL), else undefined
 * for a root that has no ledger yet.
 */
export function readBinding(root: string): RootBinding | undefined {
  const path = bindingFile(root)
  const text = readRecord(root)
  if (text !== undefined) return { binding: parseBinding(text, path), isRecorded: true }
  if (fs.existsSync(join(root, "ledger.db"))) return { binding: { backend: "sqlite" }, isRecorded: false }
  if (fs.existsSync(join(root, rootIdFile)))
    return { binding: { backend: "postgres", ledgerId: undefined, where: undefined }, isRecorded: false }
  return undefined
}

function parseBinding(text: string, path: string): Binding {
  let v: unknown
  try {
    v = JSON.parse(text)
  } catch {}
  const o = (typeof v === "object" && v !== null ? v : {}) as Record<string, unknown>
  if (o.backend === "sqlite") return { backend: "sqlite" }
  if (o.backend === "postgres")
    return {
      backend: "postgres",
      ledgerId: typeof o.ledger_id === "string" ? o.ledger_id : undefined,
      where: typeof o.where === "string" ? o.where : undefined,
    }
  throw new SpoolError(
    "unsafe-ledger",
    `${path} does not say which ledger this root is bound to (expected {"backend": "sqlite"} or {"backend": "postgres", ...}); restore it from a backup, or rebind the root on purpose (bun run setup --rebind, see docs/postgres.md)`,
  )
}

/** Records `binding` as the root's ledger (atomically: readers see the old record or the new). */
export function writeBinding(root: string, binding: Binding): void {
  writeFileAtomic(bindingFile(makeSpoolDir(root)), recordOf(binding))
}

/**
 * Records `binding` as the root's first, unless a record is there by now: of two commands that
 * give a root its first ledger at once (a consume on SQLite and one with a PostgreSQL URL, each
 * finding no binding when it looked), only one records it. Returns undefined once recorded, else
 * the binding recorded first, which the caller must check its ledger against.
 */
export function recordFirstBinding(root: string, binding: Binding): Binding | undefined {
  const path = bindingFile(makeSpoolDir(root))
  if (createFileAtomic(path, recordOf(binding))) return undefined
  return parseBinding(readRecord(root) ?? "", path)
}

/** ROOT/.spool, made if missing. A new .spool/ is a new entry of the root: fsynced, or a power cut could take the record with it. */
function makeSpoolDir(root: string): string {
  refuseStrangeSpoolDir(root)
  if (fs.mkdirSync(join(root, ".spool"), { recursive: true, mode: 0o755 }) !== undefined) fsyncDirAt(root)
  return root
}

/**
 * The text of the root's binding record, undefined when there is none. Read only from a regular
 * file in a real ROOT/.spool directory: through a link the record would be read (and written)
 * outside the root, and a FIFO there would hang every command that opens the ledger.
 */
function readRecord(root: string): string | undefined {
  refuseStrangeSpoolDir(root)
  const path = bindingFile(root)
  let fd: number
  try {
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "ENOENT") return undefined
    if (code === "ELOOP") throw strange(path, "a symbolic link")
    throw error
  }
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) throw strange(path, st.isDirectory() ? "a directory" : "not a regular file")
    return fs.readFileSync(fd, "utf8")
  } finally {
    fs.closeSync(fd)
  }
}

/** Refuses a ROOT/.spool that is there but is not a directory of the root's own (a link, a file). */
function refuseStrangeSpoolDir(root: string): void {
  const dir = join(root, ".spool")
  const what = notADirectory(dir)
  if (what !== undefined) throw strange(dir, what)
}

function strange(path: string, what: string): SpoolError {
  return new SpoolError(
    "unsafe-ledger",
    `${path} is ${what}; spool keeps a root's binding record in a regular file ROOT/.spool/ledger, inside the root, and follows no link for it. Nothing was opened. With no consumer running, put the directory and the file themselves in its place (restore them from a backup), or remove it and rebind the root on purpose (bun run setup --rebind, see docs/postgres.md)`,
  )
}

function recordOf(binding: Binding): string {
  const record =
    binding.backend === "sqlite"
      ? { backend: "sqlite" }
      : { backend: "postgres", ledger_id: binding.ledgerId, where: binding.where }
  return `${JSON.stringify(record)}\n`
}

/** How a binding is named in messages. */
function describeBinding(root: string, b: Binding): string {
  return b.backend === "sqlite"
    ? `its SQLite ledger ${join(root, "ledger.db")}`
    : `the PostgreSQL ledger ${b.where ?? "named by its SPOOL_LEDGER_URL"}${b.ledgerId === undefined ? "" : ` (ledger id ${b.ledgerId})`}`
}

const howToMove =
  "run `bun run setup --root ROOT --rebind [--ledger URL]` with no consumer running (docs/postgres.md: Moving a root to another ledger)"

/**
 * Refuses to open a ledger other than the one `root` is bound to: `url` (a postgres:// URL, or
 * undefined for the SQLite ledger in the root) and, for a root whose binding records a ledger
 * id, the id found at `url` (undefined: a database with no spool ledger of version 3 yet).
 */
export function checkBinding(
  root: string,
  bound: RootBinding | undefined,
  url: string | undefined,
  foundId: string | undefined,
): void {
  if (bound === undefined) return
  const b = bound.binding
  const recorded = bound.isRecorded ? bindingFile(root) : "its files"
  if (b.backend === "sqlite" && url !== undefined)
    throw new SpoolError(
      "unsafe-ledger",
      `this root (${root}) is bound to ${describeBinding(root, b)} (${recorded}), not to a PostgreSQL ledger; unset SPOOL_LEDGER_URL and drop --ledger to use it. Nothing was opened or created. To move the root to another ledger on purpose, ${howToMove}`,
    )
  if (b.backend === "postgres" && url === undefined)
    throw new SpoolError(
      "unsafe-ledger",
      `this root (${root}) is bound to ${describeBinding(root, b)} (${recorded}): set SPOOL_LEDGER_URL or pass --ledger with its postgres:// URL. Nothing was opened or created: a new SQLite ledger here would hold none of the root's deduplication keys. To move the root to another ledger on purpose, ${howToMove}`,
    )
  if (b.backend === "postgres" && b.ledgerId !== undefined && foundId !== b.ledgerId)
    throw new SpoolError(
      "unsafe-ledger",
      `this root (${root}) is bound to ${describeBinding(root, b)} (${recorded}), but the URL given names ${foundId === undefined ? "a database with no spool ledger" : `another ledger (ledger id ${foundId})`}; pass the URL of the root's own ledger. Nothing was changed. To move the root to another ledger on purpose, ${howToMove}`,
    )
}
