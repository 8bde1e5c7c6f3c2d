// Opening a queue's ledger: the one module that opens either adapter. Every command and the
// library open the root's own ledger here, by its binding, and get the port.
import fs from "node:fs"
import { join } from "node:path"
import { fault } from "../_fault.ts"
import { SpoolError } from "../errors.ts"
import { fsyncDirAt, renameNoReplace } from "../queue/files.ts"
import type { Queue } from "../queue/root.ts"
import {
  type Binding,
  checkBinding,
  type RootBinding,
  readBinding,
  recordFirstBinding,
  rootIdFile,
  writeBinding,
} from "./binding.ts"
import type { LedgerPort } from "./port.ts"
import { PostgresLedger, redact } from "./postgres/ledger.ts"
import { identify, isSetUp } from "./postgres/open.ts"
import { historyOf, newLedgerRefusal } from "./sqlite/files.ts"
import { SqliteLedger } from "./sqlite/ledger.ts"

/** How to reach the ledger of a queue. */
export interface OpenLedgerOptions {
  /** A `postgres://` URL: use the shared PostgreSQL ledger instead of ROOT/ledger.db. */
  readonly url?: string | undefined
  readonly durable?: boolean
  /** How long a lock wait may last: SQLite's busy timeout, the lock_timeout of PostgreSQL sessions (default 10 s). */
  readonly busyTimeoutMs?: number
  readonly readonly?: boolean
  /** SQLite: start a new ledger even beside a queue root with history (see `LedgerOptions`). */
  readonly isNewLedgerAllowed?: boolean
}

/** The ledger URL from `--ledger`, else `SPOOL_LEDGER_URL`; undefined means SQLite in the root. */
export function resolveLedgerUrl(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const url = flag ?? (env.SPOOL_LEDGER_URL || undefined)
  if (url === undefined) return undefined
  if (!/^postgres(ql)?:\/\//.test(url))
    throw new SpoolError(
      "usage",
      `--ledger/SPOOL_LEDGER_URL takes a postgres:// URL (SQLite needs none: it lives in ROOT/ledger.db), not ${JSON.stringify(url)}`,
    )
  if (!URL.canParse(url))
    throw new SpoolError(
      "usage",
      "--ledger/SPOOL_LEDGER_URL is not a URL that can be read (not shown here: it may hold a password); write it as postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, with %-escapes for the special characters of a password (# as %23, @ as %40)",
    )
  return url
}

/**
 * Opens the queue's ledger: the one the root is bound to (see binding.ts), SQLite in the root
 * or PostgreSQL at `url`. A URL where the root is bound to SQLite, none where it is bound to
 * PostgreSQL, or one that names another PostgreSQL ledger is refused (exit 2) before anything
 * is created. A writer records the binding the first time, so a root's first ledger is its own.
 */
export async function openLedger(queue: Queue, options: OpenLedgerOptions = {}): Promise<LedgerPort> {
  const url = options.url
  return url === undefined ? openSqliteLedger(queue, options) : openPostgresLedger(queue, { ...options, url })
}

/** `openLedger` with a URL: the PostgreSQL ledger itself, for a handler that runs on its transactions. */
export async function openPostgresLedger(
  queue: Queue,
  options: OpenLedgerOptions & { readonly url: string },
): Promise<PostgresLedger> {
  const url = options.url
  const bound = await checkRootLedger(queue, url)
  if (!options.readonly) fault("after-binding-check")
  // The root's id is made only once the database has answered: a wrong URL must leave the root
  // as it was, and an id file alone would count as the mark of a root bound to PostgreSQL.
  const id = options.readonly ? (readRootId(queue) ?? crypto.randomUUID()) : () => rootId(queue)
  const ledger = await PostgresLedger.open(url, id, {
    migrate: !options.readonly,
    ...(options.busyTimeoutMs !== undefined && { busyTimeoutMs: options.busyTimeoutMs }),
  })
  const b = bound?.binding
  if (!options.readonly && (bound?.isRecorded !== true || (b?.backend === "postgres" && b.ledgerId === undefined)))
    recordBinding(queue, bound, { backend: "postgres", ledgerId: await ledger.ledgerId(), where: redact(url) }, ledger)
  return ledger
}

/**
 * The refusal `openLedger` would give a root that has no `ledger.db` (and no PostgreSQL URL)
 * but has history, undefined when it would create the ledger.
 */
function newLedgerRefusalOf(queue: Queue): SpoolError | undefined {
  if (fs.existsSync(queue.ledger)) return undefined
  const history = historyOf(queue.root)
  // Looked at again after the history, as SqliteLedger.open does: a first consume may have made
  // the ledger (and then its binding record) in between.
  return history === undefined || fs.existsSync(queue.ledger)
    ? undefined
    : newLedgerRefusal(queue.ledger, "absent", history)
}

/**
 * `openLedger` for a command that must create nothing where there is no ledger yet (stats, a
 * dry run, a selection by failure reason): undefined when the root has none (no ROOT/ledger.db;
 * a database spool has never set up), and then nothing is created, in the root or the database.
 * The binding refusals apply as in openLedger; with `isLostLedgerRefused` (the commands that
 * check or prune a ledger: order-check, verify, compact) so does its refusal of a root whose
 * history outlived its `ledger.db`, which an empty answer would pass for a clean one.
 */
export async function openExistingLedger(
  queue: Queue,
  options: OpenLedgerOptions & { readonly isLostLedgerRefused?: boolean } = {},
): Promise<LedgerPort | undefined> {
  const url = options.url
  if (url === undefined) {
    if (fs.existsSync(queue.ledger)) return openSqliteLedger(queue, options)
    checkBinding(queue.root, readBinding(queue.root), undefined, undefined)
    const refusal = options.isLostLedgerRefused === true ? newLedgerRefusalOf(queue) : undefined
    if (refusal !== undefined) throw refusal
    return undefined
  }
  await checkRootLedger(queue, url)
  return (await isSetUp(url)) ? openLedger(queue, { ...options, url }) : undefined
}

/**
 * `openLedger` without a URL, synchronously: the SQLite ledger in the root, by the same rules
 * (a root bound to PostgreSQL is refused with exit 2, a writer records the binding the first time).
 */
export function openSqliteLedger(queue: Queue, options: Omit<OpenLedgerOptions, "url"> = {}): SqliteLedger {
  const bound = readBinding(queue.root)
  checkBinding(queue.root, bound, undefined, undefined)
  if (!options.readonly) fault("after-binding-check")
  const ledger = SqliteLedger.open(queue.ledger, {
    ...(options.durable !== undefined && { durable: options.durable }),
    ...(options.busyTimeoutMs !== undefined && { busyTimeoutMs: options.busyTimeoutMs }),
    ...(options.readonly !== undefined && { readonly: options.readonly }),
    ...(options.isNewLedgerAllowed !== undefined && { isNewLedgerAllowed: options.isNewLedgerAllowed }),
  })
  if (!options.readonly && bound?.isRecorded !== true) recordBinding(queue, bound, { backend: "sqlite" }, ledger)
  return ledger
}

/**
 * Refuses (exit 2) a ledger other than the one the root of `queue` is bound to: `url`, or the
 * SQLite ledger in the root when undefined. A PostgreSQL ledger's identity is read without
 * creating or changing anything, so a wrong database is refused untouched. Returns the binding.
 */
export async function checkRootLedger(queue: Queue, url: string | undefined): Promise<RootBinding | undefined> {
  const bound = readBinding(queue.root)
  const b = bound?.binding
  // The database is asked only when its identity decides: a SQLite root refuses any URL unasked.
  const needsId = url !== undefined && b?.backend === "postgres" && b.ledgerId !== undefined
  checkBinding(queue.root, bound, url, needsId ? await identify(url) : undefined)
  return bound
}

/**
 * Records a root's binding once its ledger is open: a record from before ledger ids is
 * completed, a root's first is made no-replace, and a first that another command recorded
 * meanwhile (it gave the root another ledger at the same time) refuses this one, exit 2, before
 * anything is consumed into it. A failure closes the ledger and is the open's.
 */
function recordBinding(queue: Queue, bound: RootBinding | undefined, binding: Binding, ledger: LedgerPort): void {
  try {
    if (bound?.isRecorded === true) {
      writeBinding(queue.root, binding)
      return
    }
    const first = recordFirstBinding(queue.root, binding)
    if (first === undefined) return
    const url = binding.backend === "postgres" ? (binding.where ?? "") : undefined
    checkBinding(
      queue.root,
      { binding: first, isRecorded: true },
      url,
      binding.backend === "postgres" ? binding.ledgerId : undefined,
    )
  } catch (error) {
    void ledger.close()
    throw error
  }
}

/**
 * Binds the root of `queue` to another ledger, on purpose: PostgreSQL at `url` (created or
 * migrated there), or the SQLite ledger in the root without one. Nothing is copied and no
 * binding is checked: the caller runs it with no consumer running, after copying the old
 * ledger's rows if the keys must survive. Returns the binding before and the one recorded.
 */
export async function rebindRoot(
  queue: Queue,
  url: string | undefined,
): Promise<{ readonly before: Binding | undefined; readonly after: Binding }> {
  const before = readBinding(queue.root)?.binding
  let after: Binding = { backend: "sqlite" }
  if (url !== undefined) {
    const ledger = await PostgresLedger.open(url, () => rootId(queue))
    try {
      after = { backend: "postgres", ledgerId: await ledger.ledgerId(), where: redact(url) }
    } finally {
      await ledger.close()
    }
  }
  writeBinding(queue.root, after)
  return { before, after }
}

/**
 * The queue root's identity in a shared ledger: a random id kept in ROOT/.spool-root-id,
 * created once (no-replace, so two consumers starting at once agree on it). Roots on several
 * hosts have different ids, so their file names never collide in the ledger; consumers on
 * several hosts sharing one root (a network filesystem) share its id and so its claims.
 */
function rootId(queue: Queue): string {
  const path = join(queue.root, rootIdFile)
  const read = () => fs.readFileSync(path, "utf8").trim()
  const found = readRootId(queue)
  if (found !== undefined) return durable(queue.root, found)
  // Beside the target, not in tmp/: a queue made by hand may have only the four directories.
  const tmp = join(queue.root, `${rootIdFile}.${process.pid}.${crypto.randomUUID()}.tmp`)
  // Its bytes are fsynced before it gets the name: a name a power cut keeps never holds less.
  const fd = fs.openSync(tmp, "wx", 0o644)
  try {
    fs.writeSync(fd, `${crypto.randomUUID()}\n`)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  try {
    renameNoReplace(tmp, path)
  } finally {
    fs.rmSync(tmp, { force: true })
  }
  return durable(queue.root, read())
}

/**
 * Returns `id` once ROOT/.spool-root-id is durably in the root directory. The ledger keeps its
 * rows under the id through a power cut of this disk (a PostgreSQL server keeps its power): an
 * id lost with the cut would give the root a new one, and every claim, key and outcome of the
 * old one would be another root's, its messages taken again. The root is fsynced by every
 * process that uses the id, not only by the one that made it, which may have died first.
 */
function durable(root: string, id: string): string {
  fsyncDirAt(root)
  return id
}

/**
 * The root's id if it has one. A reader of a shared ledger does not create it: the id file
 * counts as history (a root with one is taken for a PostgreSQL-bound root), and a root without
 * one has written nothing to any shared ledger, so a new id, kept nowhere, finds all of its
 * rows there: none.
 */
function readRootId(queue: Queue): string | undefined {
  try {
    return fs.readFileSync(join(queue.root, rootIdFile), "utf8").trim()
  } catch {
    return undefined
  }
}
