import fs from "node:fs"
import { join, resolve } from "node:path"
import { errnoOf, SpoolError } from "./errors.ts"

/** The four directories every queue root holds, on one filesystem. */
export const queueDirs = ["inbox", "processing", "done", "error"] as const
export type QueueDir = (typeof queueDirs)[number]

/** Absolute paths of a queue root and everything spool keeps in it. */
export interface Queue {
  readonly root: string
  readonly inbox: string
  readonly processing: string
  readonly done: string
  readonly error: string
  /** Where enqueue and setup write files before renaming them into inbox/ (Maildir's tmp/). */
  readonly tmp: string
  readonly ledger: string
}

/** The queue root: `--root`, else `SPOOL_ROOT`, else `./spool`. */
export function resolveRoot(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return resolve(flag ?? (env.SPOOL_ROOT || "spool"))
}

/** The paths of a queue root, without touching the filesystem. */
export function queuePaths(root: string): Queue {
  const r = resolve(root)
  return {
    root: r,
    inbox: join(r, "inbox"),
    processing: join(r, "processing"),
    done: join(r, "done"),
    error: join(r, "error"),
    tmp: join(r, "tmp"),
    ledger: join(r, "ledger.db"),
  }
}

/**
 * Checks that `root` is a queue: the four directories exist and share one filesystem (a
 * rename across filesystems is a copy, not atomic). Throws a SpoolError that says what to do.
 */
export function openQueue(root: string): Queue {
  const q = queuePaths(root)
  const devices = new Map<string, number>()
  for (const d of queueDirs) {
    let st: fs.Stats
    try {
      st = fs.statSync(q[d])
    } catch (error) {
      if (errnoOf(error) === "ENOENT")
        throw new SpoolError(
          "not-a-queue",
          `${q.root} is not a spool queue: ${d}/ is missing; create it with: bun run setup --root ${q.root}`,
        )
      throw new SpoolError("io", `cannot read ${q[d]}: ${String(error)}`, { cause: error })
    }
    if (!st.isDirectory()) throw new SpoolError("not-a-queue", `${q[d]} is not a directory`)
    devices.set(d, st.dev)
  }
  if (new Set(devices.values()).size > 1) {
    const list = [...devices].map(([d, dev]) => `${d}/ on device ${dev}`).join(", ")
    throw new SpoolError(
      "cross-device",
      `the queue directories of ${q.root} are on different filesystems (${list}); a rename between them would not be atomic, so put all four on one filesystem`,
    )
  }
  return q
}

/** Creates a queue root (idempotent) and checks it. */
export function createQueue(root: string): Queue {
  const q = queuePaths(root)
  for (const d of [...queueDirs, "tmp"] as const) fs.mkdirSync(q[d], { recursive: true, mode: 0o755 })
  const checked = openQueue(root)
  const tmpDev = fs.statSync(q.tmp).dev
  if (tmpDev !== fs.statSync(q.inbox).dev)
    throw new SpoolError("cross-device", `${q.tmp} must be on the same filesystem as ${q.inbox}`)
  return checked
}

/** True for names the consumer takes: `*.json`, not hidden (`.name` is a producer's temp file). */
export function isMessageName(name: string): boolean {
  return name.endsWith(".json") && !name.startsWith(".")
}

/**
 * Streams a directory's entries without ever holding the whole listing: memory stays flat
 * at any queue size.
 */
export function* scanDir(path: string, bufferSize = 256): Generator<fs.Dirent> {
  const dir = fs.opendirSync(path, { bufferSize })
  try {
    for (let e = dir.readSync(); e !== null; e = dir.readSync()) yield e
  } finally {
    dir.closeSync()
  }
}

/** How many regular files sit directly in `path` (the count lag reports). */
export function countFiles(path: string): number {
  let n = 0
  for (const e of scanDir(path, 1024)) {
    if (e.isFile()) n++
    else if (isUnknownType(e)) {
      try {
        if (fs.lstatSync(join(path, e.name)).isFile()) n++
      } catch {}
    }
  }
  return n
}

/** Some filesystems report no type in readdir (DT_UNKNOWN); such entries need an lstat. */
export function isUnknownType(e: fs.Dirent): boolean {
  return (
    !e.isFile() &&
    !e.isDirectory() &&
    !e.isSymbolicLink() &&
    !e.isFIFO() &&
    !e.isSocket() &&
    !e.isBlockDevice() &&
    !e.isCharacterDevice()
  )
}

const NAME_MAX = 255

/**
 * The k-th alternative for a name that is taken at a destination: `a.json` -> `a~1.json`.
 * The stem is shortened so the result still fits the 255-byte name limit.
 */
export function alternateName(name: string, k: number): string {
  const dot = name.endsWith(".json") ? name.length - 5 : name.length
  let stem = name.slice(0, dot)
  const tail = `~${k}${name.slice(dot)}`
  while (Buffer.byteLength(stem + tail) > NAME_MAX && stem.length > 0) stem = [...stem].slice(0, -1).join("")
  return stem + tail
}
