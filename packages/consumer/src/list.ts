import fs from "node:fs"
import { type CommandSpec, integer, json, ledger, root, runCommand } from "@spool/cli"
import {
  type ClaimRow,
  classOf,
  type ErrorClass,
  ExitCode,
  entryName,
  entryPath,
  entryShellName,
  type LedgerPort,
  openExistingLedger,
  openQueue,
  type Queue,
  type QueueDir,
  queueDirs,
  quoteName,
  resolveLedgerUrl,
  resolveRoot,
  SpoolError,
  scanDir,
} from "@spool/core/engine"
import { formatTotals, jsonWriter, silentWriter, textWriter } from "./list-output.ts"

/** What list knows of a processing/ file's claim; null fields where the ledger has none. */
export interface ListedClaim {
  /** `host:pid` of the consumer holding it; null when its consumers row is gone. */
  readonly owner: string | null
  readonly ownerId: string | null
  readonly attempts: number
  readonly state: "claimed" | "committed"
}

/** What list knows of an error/ file's latest unreplayed failure. */
export interface ListedFailure {
  readonly reason: string
  readonly class: ErrorClass
  readonly failedAt: string
}

/** What list knows of a deferred/ file's deferral: how often it failed, and when it is tried again. */
export interface ListedDeferral {
  readonly msgId: string
  readonly attempts: number
  readonly firstDeferredAt: string
  readonly nextAttemptAt: string
  readonly lastError: string
}

/** One entry of a queue directory, as `list --json` prints it. */
export interface ListEntry {
  readonly dir: QueueDir
  readonly name: string
  /** Only for a name that is not UTF-8 (`name` is then its %XX spelling): the exact name, quoted for a shell. */
  readonly shellName?: string
  readonly type: "file" | "symlink" | "directory" | "other"
  /** Bytes (of the link itself for a symlink). */
  readonly size: number
  readonly mtime: string
  /** Seconds since the entry came into this directory, by the directory's clock (see `views`). */
  readonly ageSeconds: number
  /** processing/ only: its claim, null when the ledger has none (an orphan, or no ledger). */
  readonly claim?: ListedClaim | null
  /** error/ only: its latest unreplayed failure, null when the ledger has none. */
  readonly failure?: ListedFailure | null
  /** deferred/ only: its deferral, null when the ledger has none. */
  readonly deferral?: ListedDeferral | null
}

type Annotation = Pick<ListEntry, "claim" | "failure" | "deferral">

/** What the ledger adds to each of one chunk of a directory's names (null facts where it knows none). */
type Annotator = (names: readonly string[]) => Promise<Map<string, Annotation>>

/** How list reads each directory. One more queue directory is one more entry here. */
interface DirView {
  /**
   * Which timestamp dates an entry: `mtime`, the producer's write (kept by every rename, reset by
   * replay), or `ctime`, which the rename into the directory sets.
   */
  readonly clock: "mtime" | "ctime"
  /** The ledger's facts about a chunk of its names; absent for a directory the ledger says nothing of. */
  readonly annotator?: (ledger: LedgerPort | undefined) => Annotator
}

const views: Record<QueueDir, DirView> = {
  inbox: { clock: "mtime" },
  processing: { clock: "ctime", annotator: claimsOf },
  done: { clock: "ctime" },
  error: { clock: "ctime", annotator: failuresOf },
  // Since it was deferred; its attempts and next attempt time are the ledger's.
  deferred: { clock: "ctime", annotator: deferralsOf },
}

/** The directories list shows when none is named: the ones an operator has to act on. */
const defaultDirs: readonly QueueDir[] = ["inbox", "processing", "deferred", "error"]

// Names are looked up in the ledger this many at a time: a directory is never held whole.
const chunkSize = 512

/** `spool list`'s options and help. */
export const spec = {
  name: "list",
  usage: `bun run list [--root DIR] [--ledger URL] [--json] [--limit N] [${queueDirs.join("|")} ...]`,
  summary: "One line per file in the queue's directories, with its claim's owner, failure or next attempt.",
  description:
    `Lists ${defaultDirs.map((d) => `${d}/`).join(", ")} (or the directories named) in directory order, unsorted:\n` +
    "sorting would hold every name of a large directory. Each line: directory, age, size in bytes, name\n" +
    "(quoted as every spool command quotes names), and for processing/ the claim's owner (host:pid) and\n" +
    "attempts, for error/ the latest unreplayed failure's reason and class, for deferred/ the transient\n" +
    "failures so far and the next attempt's time. An inbox/ age is since the file\n" +
    "was written or replayed (mtime), any other since it was moved there (ctime). Read-only: creates no\n" +
    "ledger, and with none yet shows no owners or reasons. The last line gives the totals: files and bytes\n" +
    "listed, and the files of each directory.",
  arguments: [
    { name: "DIR...", help: `${queueDirs.join(", ")} (default: ${defaultDirs.join(", ")})`, choices: queueDirs },
  ],
  options: {
    root,
    ledger,
    json: { ...json, help: "one JSON array of entries on stdout instead of lines" },
    limit: integer("at most N entries of each directory; the rest are counted on stderr", { min: 1 }),
  },
  exitCodes: [0, 2, 3],
  examples: [
    { args: "--root /srv/spool/orders", does: "every file waiting, claimed, failed or deferred, and the totals" },
    { args: "--root /srv/spool/orders error", does: "the files in error/ with their reasons" },
    { args: "--root /srv/spool/orders --json deferred", does: "the deferred files as JSON, with their next attempts" },
  ],
} satisfies CommandSpec

/** `spool list`: the entries of the queue's directories, with what the ledger knows of each. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values: v, positionals, quiet }) => {
    const dirs = positionals.length === 0 ? defaultDirs : [...new Set(positionals.map(toDir))]
    const queue = openQueue(resolveRoot(v.root))
    const needsLedger = dirs.some((d) => views[d].annotator !== undefined)
    const ledger = needsLedger
      ? await openExistingLedger(queue, { url: resolveLedgerUrl(v.ledger), readonly: true })
      : undefined
    try {
      const out = quiet ? silentWriter : v.json ? jsonWriter() : textWriter()
      const totals = new Map<QueueDir, { files: number; bytes: number }>(dirs.map((d) => [d, { files: 0, bytes: 0 }]))
      const counted = async (entries: readonly ListEntry[]) => {
        for (const e of entries) {
          const t = totals.get(e.dir)
          if (t !== undefined) {
            t.files++
            t.bytes += e.size
          }
        }
        await out.write(entries)
      }
      let unlisted = 0
      for (const dir of dirs) {
        const more = await listDir(queue, dir, ledger, v.limit, counted)
        unlisted += more
        if (more > 0 && !quiet) await Bun.write(Bun.stderr, `list: ${dir}/ has ${more} more (--limit ${v.limit})\n`)
      }
      await out.end()
      if (!quiet && !v.json) await Bun.write(Bun.stdout, formatTotals(totals, unlisted))
    } finally {
      await ledger?.close()
    }
    return ExitCode.ok
  })
}

function toDir(text: string): QueueDir {
  const dir = text.replace(/\/+$/, "")
  if ((queueDirs as readonly string[]).includes(dir)) return dir as QueueDir
  throw new SpoolError("usage", `${quoteName(text)} is not a queue directory; name one of ${queueDirs.join(", ")}`)
}

/**
 * Streams the entries of one directory to `write`, a chunk at a time, each chunk annotated from
 * the ledger; returns how many entries past `limit` it counted without listing them. With
 * `keep`, only the annotated entries it keeps are listed and counted: the limit applies to
 * them, so a filter finds what it asks for however many other entries come first.
 */
export async function listDir(
  queue: Queue,
  dir: QueueDir,
  ledger: LedgerPort | undefined,
  limit: number | undefined,
  write: (entries: readonly ListEntry[]) => Promise<void>,
  keep?: (entry: ListEntry) => boolean,
): Promise<number> {
  const view = views[dir]
  const annotate = view.annotator?.(ledger)
  const now = Date.now()
  let chunk: ListEntry[] = []
  let listed = 0
  let more = 0
  const flush = async () => {
    if (chunk.length === 0) return
    const notes = await annotate?.(chunk.map((e) => e.name))
    const annotated = notes === undefined ? chunk : chunk.map((e) => ({ ...e, ...notes.get(e.name) }))
    chunk = []
    if (keep === undefined) return await write(annotated)
    const kept = annotated.filter(keep)
    const room = limit === undefined ? kept.length : Math.max(0, limit - listed)
    listed += Math.min(room, kept.length)
    more += Math.max(0, kept.length - room)
    if (room > 0) await write(kept.slice(0, room))
  }
  for (const d of scanDir(queue[dir], 1024)) {
    if (keep === undefined && limit !== undefined && listed >= limit) {
      more++
      continue
    }
    const entry = entryOf(entryPath(queue[dir], d), dir, entryName(d), view, now)
    if (entry === undefined) continue
    const shellName = entryShellName(d)
    chunk.push(shellName === undefined ? entry : { ...entry, shellName })
    if (keep === undefined) listed++
    if (chunk.length >= chunkSize) await flush()
  }
  await flush()
  return more
}

/** One entry as lstat sees it at `path`, listed as `name`; undefined when it left the directory since readdir. */
function entryOf(
  path: string | Buffer,
  dir: QueueDir,
  name: string,
  view: DirView,
  now: number,
): ListEntry | undefined {
  let st: fs.Stats
  try {
    st = fs.lstatSync(path)
  } catch {
    return undefined
  }
  const type = st.isFile() ? "file" : st.isSymbolicLink() ? "symlink" : st.isDirectory() ? "directory" : "other"
  const since = view.clock === "mtime" ? st.mtimeMs : st.ctimeMs
  return {
    dir,
    name,
    type,
    size: st.size,
    mtime: st.mtime.toISOString(),
    ageSeconds: Math.max(0, Math.floor((now - since) / 1000)),
  }
}

/** processing/: each file's claim row and its owner; the claims are few (the batches in flight), read once. */
function claimsOf(ledger: LedgerPort | undefined): Annotator {
  let claims: Map<string, ClaimRow> | undefined
  return byName(
    ledger,
    async (l) => (claims ??= new Map((await l.listClaims()).map((c) => [c.name, c]))),
    (c) => ({
      claim:
        c === undefined
          ? null
          : {
              owner: c.owner === undefined ? null : `${c.owner.host}:${c.owner.pid}`,
              ownerId: c.ownerId,
              attempts: c.attempts,
              state: c.state,
            },
    }),
  )
}

/**
 * An annotator that asks the ledger about one chunk of names at a time (`lookup`: the rows it
 * has, by name) and says what each name's row, or its absence, means (`note`).
 */
function byName<R>(
  ledger: LedgerPort | undefined,
  lookup: (ledger: LedgerPort, names: readonly string[]) => Promise<Map<string, R>> | Map<string, R>,
  note: (row: R | undefined) => Annotation,
): Annotator {
  return async (names) => {
    const rows = ledger === undefined ? new Map<string, R>() : await lookup(ledger, names)
    return new Map(names.map((name) => [name, note(rows.get(name))]))
  }
}

/** error/: each file's latest unreplayed failure. */
function failuresOf(ledger: LedgerPort | undefined): Annotator {
  return byName(
    ledger,
    (l, names) => l.unreplayedFailures(names),
    (f) => ({ failure: f === undefined ? null : { reason: f.reason, class: classOf(f.reason), failedAt: f.failedAt } }),
  )
}

/** deferred/: each file's deferrals row. */
function deferralsOf(ledger: LedgerPort | undefined): Annotator {
  return byName(
    ledger,
    (l, names) => l.deferralsAt(names),
    (d) => ({
      deferral:
        d === undefined
          ? null
          : {
              msgId: d.msgId,
              attempts: d.attempts,
              firstDeferredAt: d.firstDeferredAt,
              nextAttemptAt: d.nextAttemptAt,
              lastError: d.lastError,
            },
    }),
  )
}
