import fs from "node:fs"
import { dirname, join, resolve } from "node:path"
import { errnoOf, SpoolError } from "../errors.ts"
import { enclosingRoot, insideQueuePhrase } from "./enclosing.ts"
import { fsyncDirAt, type OpenDir, renameNoReplaceAt } from "./files.ts"
import { mountPoints } from "./mounts.ts"
import { alternateName, quoteName } from "./names.ts"

/**
 * The directories every queue root holds, on one filesystem. deferred/ holds the files whose
 * effect failed transiently, each until the next attempt time its deferrals row records.
 */
export const queueDirs = ["inbox", "processing", "done", "error", "deferred"] as const
export type QueueDir = (typeof queueDirs)[number]

/** Absolute paths of a queue root and everything spool keeps in it. */
export interface Queue {
  readonly root: string
  readonly inbox: string
  readonly processing: string
  readonly done: string
  readonly error: string
  /** Files whose effect failed transiently (TransientError), waiting for their next attempt. */
  readonly deferred: string
  /** Where enqueue and setup write files before renaming them into inbox/ (Maildir's tmp/). */
  readonly tmp: string
  readonly ledger: string
  /** What the root was on disk when openQueue checked it; a long run compares it (checkSameQueue). */
  readonly identity?: ReadonlyMap<string, string>
}

/**
 * The queue root: `--root`, else `SPOOL_ROOT`, else the queue root the working directory is in
 * (itself or its nearest ancestor that holds inbox/, processing/, done/ and error/, the way git
 * finds its repository), else `./spool`.
 */
export function resolveRoot(
  flag: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
): string {
  // An empty --root (an unset variable in --root "$DIR") would mean the working directory.
  if (flag !== undefined && flag.trim() === "")
    throw new SpoolError("usage", '--root is empty; give the queue root\'s path (an unset variable in --root "$DIR"?)')
  if (flag !== undefined) return resolve(cwd, flag)
  if (env.SPOOL_ROOT) return resolve(cwd, env.SPOOL_ROOT)
  return enclosingRoot(cwd) ?? resolve(cwd, "spool")
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
    deferred: join(r, "deferred"),
    tmp: join(r, "tmp"),
    ledger: join(r, "ledger.db"),
  }
}

/**
 * Checks that `root` is a queue: the five directories exist, none of them (nor tmp/) is a
 * symbolic link, and they share one filesystem and one mount (a rename across filesystems is a
 * copy, not atomic, and one across mounts fails). Throws a SpoolError that says what to do.
 * The queue it returns keeps what the root was (its identity), for checkSameQueue.
 */
export function openQueue(root: string): Queue {
  const q = queuePaths(root)
  refuseLinkedDirs(q)
  addDeferred(q)
  const devices = new Map<string, number>()
  for (const d of queueDirs) {
    let st: fs.Stats
    try {
      st = fs.statSync(q[d])
    } catch (error) {
      // ENOTDIR: the root (or a parent) is a regular file, which is just as much not a queue.
      if (errnoOf(error) === "ENOENT" || errnoOf(error) === "ENOTDIR")
        throw new SpoolError(
          "not-a-queue",
          insideQueuePhrase(q.root) ??
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
      `the queue directories of ${q.root} are on different filesystems (${list}); a rename between them would not be atomic, so put all five on one filesystem`,
    )
  }
  // No queue directory is a link (refused above): each one's real path is the root's and its name.
  const mounts = mountPoints()
  const realRoot = fs.realpathSync(q.root)
  for (const d of queueDirs) {
    if (!mounts.has(join(realRoot, d))) continue
    throw new SpoolError(
      "cross-device",
      `${q[d]} is a mount of its own (a bind mount, or a container volume for one directory): a rename between it and the other queue directories fails even on one filesystem, so mount the queue root as a whole instead`,
    )
  }
  return { ...q, identity: queueIdentity(q) }
}

/**
 * What the entry at `path` is when it is there but is not a real directory ("a symbolic link",
 * "not a directory"), never following a link; undefined when it is a directory or absent.
 */
export function notADirectory(path: string): string | undefined {
  const st = fs.lstatSync(path, { throwIfNoEntry: false })
  if (st === undefined || st.isDirectory()) return undefined
  return st.isSymbolicLink() ? "a symbolic link" : "not a directory"
}

/**
 * What a queue root is on disk: the inode of the root (through a link to it, so that a link
 * made again to the same place is the same root) and of each queue directory and tmp/, by
 * lstat. Inode numbers alone: an NFS or autofs root may come back on another device number.
 */
export function queueIdentity(q: Queue): ReadonlyMap<string, string> {
  const identity = new Map<string, string>()
  const root = fs.statSync(q.root, { throwIfNoEntry: false })
  if (root !== undefined) identity.set("the root", String(root.ino))
  for (const d of [...queueDirs, "tmp"] as const) {
    const st = fs.lstatSync(q[d], { throwIfNoEntry: false })
    if (st !== undefined) identity.set(`${d}/`, `${st.isDirectory() ? "" : "not a directory "}${st.ino}`)
  }
  return identity
}

/**
 * Refuses (exit 2) to go on with a queue root that is no longer the one openQueue checked: a
 * queue directory replaced by a link or another directory, the root moved, swapped or unmounted
 * (its path now names what was under the mount). Each drain opens the directories by path,
 * while the ledger stays open on the file it started with: going on would move files outside
 * the root, or record one queue's messages in another's ledger. A queue not opened by openQueue
 * (no identity) is not checked. Changes nothing, whatever it finds.
 */
export function checkSameQueue(q: Queue): void {
  const was = q.identity
  if (was === undefined) return
  const now = queueIdentity(q)
  for (const [name, id] of was) {
    // A tmp/ removed (cleaning temporary files) is made again by whoever writes there next.
    if (now.get(name) === id || (name === "tmp/" && !now.has(name))) continue
    const path = name === "the root" ? q.root : join(q.root, name.slice(0, -1))
    const what = now.has(name) ? (notADirectory(path) ?? "another directory") : "gone"
    throw new SpoolError(
      "not-a-queue",
      `${q.root} changed under this run: ${name} is ${what} now, not the one it started on (replaced, moved, linked elsewhere, or a file system mounted or unmounted over it); nothing more was taken. Find out what changed, put the queue back as it was, and start consume again`,
    )
  }
}

/**
 * Creates deferred/ in a root made before it existed, beside the others (no-op when it is there).
 * Only when inbox/ is there, so a path that is no queue at all is still refused as one; a
 * reader without write access leaves it missing and the check below says so.
 */
function addDeferred(q: Queue): void {
  if (!fs.existsSync(q.inbox)) return
  try {
    fs.mkdirSync(q.deferred, { mode: 0o755 })
    // Files deferred into it are made durable by fsyncs of deferred/ itself; its own name in
    // the root must be durable first, or a power cut takes it with every deferred message.
    fsyncDirAt(q.root)
  } catch {}
}

/**
 * Refuses a root whose queue directories or tmp/ include a symbolic link. spool moves files
 * only between the directories of its root; through a link, `error/` or `done/` would receive
 * files outside it and `inbox/` would drain a directory elsewhere, and the one-filesystem
 * check would hold for the link's target, not for the root. The root itself may be a link:
 * that path is the operator's explicit choice, and everything under it stays together.
 */
function refuseLinkedDirs(q: Queue): void {
  for (const d of [...queueDirs, "tmp"] as const) {
    let st: fs.Stats | undefined
    try {
      st = fs.lstatSync(q[d], { throwIfNoEntry: false })
    } catch (error) {
      // The root (or a parent) is a regular file: the caller's checks say so in their words.
      if (errnoOf(error) === "ENOTDIR") return
      throw new SpoolError("io", `cannot read ${q[d]}: ${String(error)}`, { cause: error })
    }
    if (!st?.isSymbolicLink()) continue
    let target: string | undefined
    try {
      target = fs.readlinkSync(q[d])
    } catch {}
    const dir = quoteName(q[d])
    const to = target === undefined ? "its target" : quoteName(target)
    throw new SpoolError(
      "not-a-queue",
      `${quoteName(q.root)} is not a queue: ${dir} is a symbolic link to ${to}, and spool never follows a ` +
        "link inside a queue root (its renames would move files out of the root); nothing was changed. " +
        `Replace the link with a real directory on the root's filesystem: rm ${dir} && mkdir ${dir}, then ` +
        `move in what ${to} holds. To keep the whole queue elsewhere, make the root itself the link.`,
    )
  }
}

/** Creates a queue root (idempotent) and checks it; refuses, creating nothing, a root with a linked directory. */
export function createQueue(root: string): Queue {
  const q = queuePaths(root)
  const inside = insideQueuePhrase(q.root)
  // A queue made in another's error/ or inbox/ would be drained, moved or archived by it.
  if (inside !== undefined) throw new SpoolError("not-a-queue", `cannot create a queue here: ${inside}`)
  refuseLinkedDirs(q)
  // The directories that hold each new directory's name: fsynced once all are made, so that a
  // power cut cannot take inbox/ (and what is enqueued into it) with it.
  const parents = new Set<string>()
  for (const d of [...queueDirs, "tmp"] as const) {
    try {
      const first = fs.mkdirSync(q[d], { recursive: true, mode: 0o755 })
      for (let made = q[d]; first !== undefined; made = dirname(made)) {
        parents.add(dirname(made))
        if (made === first || made === dirname(made)) break
      }
    } catch (error) {
      const code = errnoOf(error)
      // EEXIST from a recursive mkdir: the name is taken by something that is not a directory.
      if (code === "ENOTDIR" || code === "EEXIST")
        throw new SpoolError(
          "not-a-queue",
          `cannot create ${q[d]}: ${code === "EEXIST" ? "a file of that name is in the way" : "a parent of it is a file, not a directory"}; choose another --root or move the file`,
        )
      throw new SpoolError("io", `cannot create ${q[d]}: ${String(error)}`, { cause: error })
    }
  }
  for (const parent of parents) fsyncDirAt(parent)
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
 * What the consumer does with an entry of inbox/, or of processing/ when no claim explains it:
 * `take` it (a regular file is read; anything else named *.json, a directory, FIFO or link, is
 * sent to error/ unopened, by its kind), leave it as `not-a-message` (hidden, not *.json),
 * leave it as `undecodable` (a name that is not valid UTF-8, which readdir gives with U+FFFD
 * and which opens nothing under that spelling), or leave it as `too-young` for a later run.
 */
type EntryFate = "take" | "not-a-message" | "undecodable" | "too-young"

/** The consumer's one rule for an entry `name` found in `dir` at `now` (see EntryFate). */
export function judgeEntry(dir: string, name: string, minAgeMs: number, now: number): EntryFate {
  if (!isMessageName(name)) return "not-a-message"
  if (name.includes("\uFFFD") && !opensUnder(join(dir, name))) return "undecodable"
  if (minAgeMs > 0 && !isOldEnough(join(dir, name), minAgeMs, now)) return "too-young"
  return "take"
}

/** Whether `path` names an entry; its U+FFFD spelling may pass 255 bytes (ENAMETOOLONG). */
function opensUnder(path: string): boolean {
  try {
    return fs.lstatSync(path, { throwIfNoEntry: false }) !== undefined
  } catch {
    return false
  }
}

/**
 * Whether a file was last written at least minAgeMs before `now`, by its mtime. A future
 * mtime (a producer whose clock runs ahead, or a copy that kept one: rsync -t, cp -p, unzip)
 * would hold the file back until this clock caught up, possibly for years; such a file is
 * judged by its ctime instead, which no producer can set (utimes does not) and which every
 * write and every rename move to this kernel's now.
 */
function isOldEnough(path: string, minAgeMs: number, now: number): boolean {
  try {
    const s = fs.lstatSync(path)
    return (s.mtimeMs <= now ? s.mtimeMs : s.ctimeMs) <= now - minAgeMs
  } catch {
    return false
  }
}

/**
 * Moves a finished file `name` from `from` into `to` as `preferred`, or as name~1, name~2, ...
 * while that is taken, never replacing anything; returns the name it got there, or undefined
 * if the file is gone (the caller decides what that means). The consume engine's one way out
 * of processing/, on either thread.
 */
export function moveFinished(from: OpenDir, name: string, to: OpenDir, preferred: string): string | undefined {
  for (let k = 0; ; k++) {
    const target = k === 0 ? preferred : alternateName(name, k)
    const r = renameNoReplaceAt(from, name, to, target)
    if (r === "exists") continue
    return r === "missing" ? undefined : target
  }
}
