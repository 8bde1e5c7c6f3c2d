import { dlopen, type FFIFunction, FFIType, type Library, type Pointer, ptr, read } from "bun:ffi"
import fs from "node:fs"
import { basename, dirname, join } from "node:path"
import { errnoOf, SpoolError } from "../errors.ts"
import { accountOf, ownerOf } from "./accounts.ts"
import { quoteName } from "./names.ts"

const AT_FDCWD = -100
const RENAME_NOREPLACE = 1
const EEXIST = 17
const ENOENT = 2

type Renameat2 = (olddirfd: number, oldpath: Buffer, newdirfd: number, newpath: Buffer, flags: number) => number
type Renameat2Raw = (olddirfd: number, oldpath: Pointer, newdirfd: number, newpath: Pointer, flags: number) => number

/**
 * libc through bun:ffi with `symbols`, or undefined off Linux or where it cannot be loaded. The
 * caller keeps the library referenced for as long as it calls it, as every buffer whose
 * pointer it hands over: the collector frees what nothing references, pointers taken or not.
 */
export function openLibc<const T extends Record<string, FFIFunction>>(symbols: T): Library<T> | undefined {
  if (process.platform !== "linux") return undefined
  for (const name of ["libc.so.6", "libc.so"]) {
    try {
      return dlopen(name, symbols)
    } catch {}
  }
  return undefined
}

/** This thread's errno after a call through `lib` (opened with `__errno_location`). */
export function errnoOfLibc(lib: { symbols: { __errno_location: (...args: never[]) => unknown } }): number {
  const p = lib.symbols.__errno_location() as Pointer | null
  return p === null ? 0 : read.i32(p, 0)
}

// renameat2(RENAME_NOREPLACE) is the only single syscall that moves a file without ever
// replacing one at the destination. Node exposes only rename(2), which overwrites, so we
// reach libc through bun:ffi and fall back to link(2)+unlink(2) where it is unavailable.
const native = ((): { renameat2: Renameat2; renameat2Raw: Renameat2Raw; errno: () => number } | undefined => {
  if (process.env.SPOOL_NO_RENAMEAT2 === "1") return undefined
  const lib = openLibc({
    renameat2: { args: [FFIType.i32, FFIType.ptr, FFIType.i32, FFIType.ptr, FFIType.u32], returns: FFIType.i32 },
    __errno_location: { args: [], returns: FFIType.ptr },
  })
  if (lib === undefined) return undefined
  return {
    renameat2: (a, b, c, d, e) => lib.symbols.renameat2(a, ptr(b), c, ptr(d), e),
    renameat2Raw: (a, b, c, d, e) => lib.symbols.renameat2(a, b, c, d, e),
    errno: () => errnoOfLibc(lib),
  }
})()

let isRenameat2Usable = native !== undefined

const cString = (path: string | Buffer): Buffer => Buffer.concat([Buffer.from(path), Buffer.of(0)])

/** The result of a move that must not replace anything. */
type MoveResult = "moved" | "exists" | "missing"

/**
 * Moves `from` to `to` atomically, never replacing an existing `to`. Works for any kind of
 * directory entry (file, FIFO, symlink, directory) without opening it. `from` may be raw
 * bytes, for a name that is not valid UTF-8 and so has no exact string spelling.
 */
export function renameNoReplace(from: string | Buffer, to: string): MoveResult {
  if (isRenameat2Usable && native) {
    if (native.renameat2(AT_FDCWD, cString(from), AT_FDCWD, cString(to), RENAME_NOREPLACE) === 0) return "moved"
    const errno = native.errno()
    if (errno === EEXIST) return "exists"
    if (errno === ENOENT) return fs.existsSync(dirname(to)) ? "missing" : fail(from, to, "ENOENT")
    // EINVAL/ENOSYS: the filesystem (NFS, some FUSE) cannot do it; fall back for good.
    if (errno !== 22 && errno !== 38 && errno !== 95) fail(from, to, errnoNames[errno] ?? `errno ${errno}`)
    isRenameat2Usable = false
  }
  return linkThenUnlink(from, to)
}

/** A directory held open for the run: its path (for messages and fallbacks) and a descriptor. */
export interface OpenDir {
  readonly path: string
  readonly fd: number
}

// Scratch C strings for renameAt: the hot path renames two files per message, and encoding
// each name into a fixed buffer costs no allocation. Larger than JSC's inline typed-array
// limit, so the memory is out of line and never moves: the pointers are taken once.
const fromName = Buffer.alloc(4096)
const toName = Buffer.alloc(4096)
const fromNamePtr = ptr(fromName)
const toNamePtr = ptr(toName)

/** Writes `name` into `buffer` as a NUL-terminated C string; false if it does not fit or is not exact UTF-8. */
export function putCString(buffer: Buffer, name: string): boolean {
  const n = buffer.write(name, 0, "utf8")
  if (n >= buffer.length - 1 || Buffer.byteLength(name) !== n) return false
  buffer[n] = 0
  return true
}

/**
 * renameNoReplace for a plain name inside a directory held open (renameat2 on the directory
 * descriptors): the kernel resolves one component instead of a whole path, and nothing is
 * allocated. Same results and errors as renameNoReplace on the joined paths.
 */
export function renameNoReplaceAt(from: OpenDir, name: string, to: OpenDir, newName: string): MoveResult {
  if (isRenameat2Usable && native && putCString(fromName, name) && putCString(toName, newName)) {
    if (native.renameat2Raw(from.fd, fromNamePtr, to.fd, toNamePtr, RENAME_NOREPLACE) === 0) return "moved"
    const errno = native.errno()
    if (errno === EEXIST) return "exists"
  }
  return renameNoReplace(join(from.path, name), join(to.path, newName))
}

function linkThenUnlink(from: string | Buffer, to: string): MoveResult {
  let st: fs.Stats
  try {
    st = fs.lstatSync(from)
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return "missing"
    throw error
  }
  // link(2) cannot take directories; they are rare in a queue and rename is fine when the
  // destination is absent (checked just before, a race we accept only for directories).
  if (st.isDirectory()) {
    if (fs.existsSync(to)) return "exists"
    fs.renameSync(from, to)
    return "moved"
  }
  try {
    fs.linkSync(from, to)
  } catch (error) {
    const code = errnoOf(error)
    // ENOENT from link(2) is either side: only a vanished source is "missing", as with renameat2.
    if (code === "ENOENT") return fs.existsSync(dirname(to)) ? "missing" : fail(from, to, "ENOENT")
    if (code !== "EEXIST") fail(from, to, code ?? String(error))
    // A crash between link and unlink leaves both names on one inode: finish the move.
    if (!isSameInode(st, to)) return "exists"
  }
  fs.unlinkSync(from)
  return "moved"
}

function isSameInode(st: fs.Stats, path: string): boolean {
  try {
    const other = fs.lstatSync(path)
    return other.ino === st.ino && other.dev === st.dev
  } catch {
    return false
  }
}

function fail(from: string | Buffer, to: string, code: string): never {
  throw new SpoolError("io", `cannot move ${from} to ${to}: ${explainMoveError(code, String(from), to)}`)
}

/** errno numbers renameat2 can answer with, by name. */
const errnoNames: Readonly<Record<number, string>> = {
  1: "EPERM",
  2: "ENOENT",
  5: "EIO",
  13: "EACCES",
  18: "EXDEV",
  28: "ENOSPC",
  30: "EROFS",
  36: "ENAMETOOLONG",
  122: "EDQUOT",
}

/** What a failed move's errno means for the operator, and what to do about it. */
function explainMoveError(code: string, from: string, to: string): string {
  const dirs = dirname(from) === dirname(to) ? dirname(to) : `${dirname(from)} and ${dirname(to)}`
  switch (code) {
    case "EACCES":
    case "EPERM":
      return `permission denied (${code}): this user (uid ${process.getuid?.() ?? "?"}) may not change ${dirs}; give it write access to every queue directory (an immutable attribute, see lsattr, forbids it too), then run again`
    case "EROFS":
      return `the filesystem is read-only (EROFS); remount it read-write, then run again`
    case "ENOSPC":
    case "EDQUOT":
      return `the disk is full (${code}): a directory could not grow; free space on it (df), then run again`
    case "ENOENT":
      return `${dirname(to)} does not exist (ENOENT); recreate the queue directory, then run again`
    case "EXDEV":
      return "the two directories are on different filesystems (EXDEV); keep the whole queue root on one filesystem"
    case "ENAMETOOLONG":
      return `the new name or its path is longer than the filesystem takes (ENAMETOOLONG: at most 255 bytes a name, 4096 a path; the name has ${Buffer.byteLength(basename(to))} bytes); move the file out of ${dirname(from)} by hand under a shorter name, then run again`
    default:
      return `${code}; check the system log for disk errors, then run again`
  }
}

/** True when both paths name the same inode (a half-finished link+unlink move). */
export function isSameFile(a: string, b: string): boolean {
  try {
    return isSameInode(fs.lstatSync(a), b)
  } catch {
    return false
  }
}

/**
 * A message file as read, or why it was not read: it goes to error/ with that reason, except
 * a file that is no longer there (`vanished`: another consumer took it over, or it was
 * removed by hand), which is nobody's to move.
 */
export type FileRead =
  | { readonly ok: true; readonly bytes: Uint8Array }
  | {
      readonly ok: false
      readonly reason: "symlink" | "not-regular" | "too-large" | "unreadable" | "vanished"
      readonly detail: string
    }

/**
 * The most bytes a message may have, whatever maxBytes says: a message is read whole into memory
 * and decoded as one string, and a buffer past a gigabyte or a string past 2^30 characters is
 * beyond what the runtime gives one value.
 */
export const maxMessageBytes = 1024 * 1024 * 1024

/** How a message file is opened: never a symbolic link's target, never waiting on a FIFO. */
export const O_READ = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK

/**
 * Reads one claimed file from `dir`, never opening anything that is not a regular file: no
 * FIFO (it would block), device (side effects) or symbolic link (its target is outside the
 * queue). `isRegular` is readdir's word that it is a regular file; without it the entry is
 * lstat-ed first. The bytes are a view into `scratch` when the file fits, so they are valid
 * only until the next call. I/O errors throw a SpoolError.
 */
export function readMessageFile(
  dir: OpenDir,
  name: string,
  isRegular: boolean,
  maxBytes: number,
  scratch: Buffer,
): FileRead {
  const path = join(dir.path, name)
  if (!isRegular) {
    let st: fs.Stats
    try {
      st = fs.lstatSync(path)
    } catch (error) {
      if (errnoOf(error) === "ENOENT") return vanished
      throw new SpoolError("io", `cannot stat ${quoteName(path)}: ${String(error)}`, { cause: error })
    }
    if (st.isSymbolicLink()) return symlink
    if (!st.isFile()) return { ok: false, reason: "not-regular", detail: kindOf(st) }
  }
  let fd: number
  try {
    fd = fs.openSync(path, O_READ)
  } catch (error) {
    const code = errnoOf(error)
    if (code === "ELOOP") return symlink
    if (code === "ENXIO") return { ok: false, reason: "not-regular", detail: "a socket" }
    if (code === "ENOENT") return vanished
    const denied = code === "EACCES" ? unreadable(path) : undefined
    if (denied !== undefined) return denied
    throw new SpoolError("io", `cannot open ${quoteName(path)}: ${String(error)}`, { cause: error })
  }
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) return { ok: false, reason: "not-regular", detail: kindOf(st) }
    if (st.size > maxBytes) return tooLargeRead(st.size, maxBytes)
    // read(2) may return less than asked (NFS, FUSE), and the file may still be growing: read
    // to end of file or to one byte past the limit, whichever comes first. A file larger than
    // the scratch buffer gets a buffer of its own, of its size (a limit of gigabytes is no
    // reason to allocate them for a file of megabytes), doubled while it grows.
    let buffer = st.size < scratch.length ? scratch : Buffer.allocUnsafe(Math.min(maxBytes, st.size) + 1)
    let n = 0
    for (;;) {
      const wanted = buffer.length - n
      const r = fs.readSync(fd, buffer, n, wanted, n)
      n += r
      // A short read that reached the size fstat gave is end of file: skip the read that
      // would only return 0 (one syscall per message saved).
      if (r === 0 || n > maxBytes || (r < wanted && n >= st.size)) break
      if (n === buffer.length) {
        const bigger = Buffer.allocUnsafe(Math.min(maxBytes + 1, buffer.length * 2))
        buffer.copy(bigger)
        buffer = bigger
      }
    }
    if (n > maxBytes) return tooLarge(`grew past the ${maxBytes}-byte limit`)
    return { ok: true, bytes: buffer.subarray(0, n) }
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * A file whose owner and mode deny this process reading it (a producer running as another user
 * wrote it with mode 0600): the bytes may be fine, so it goes to error/ saying whose it is and
 * what to do, and the queue goes on; after a chmod or chown it is replayed as it is. Undefined
 * when its mode would allow reading: then something else refused (an ACL, a security module, an
 * on-access scanner, maybe for a moment), and the run stops on it as on any I/O error.
 */
function unreadable(path: string): FileRead | undefined {
  let st: fs.Stats
  try {
    st = fs.statSync(path)
  } catch {
    return undefined
  }
  if (!isDeniedByMode(st)) return undefined
  const me = accountOf(process.getuid?.() ?? -1)
  return {
    ok: false,
    reason: "unreadable",
    detail: `EACCES: the consumer, running as ${me.text}, may not read it, ${ownerOf(st)}; make it readable (chmod o+r or chown ${me.chown}, or have the producer write it so), then replay it`,
  }
}

/** Whether a file's owner, group and mode bits alone deny this process reading it. */
function isDeniedByMode(st: fs.Stats): boolean {
  const uid = process.getuid?.()
  if (uid === undefined || uid === 0) return false
  if (st.uid === uid) return (st.mode & 0o400) === 0
  const groups = new Set([process.getgid?.(), ...(process.getgroups?.() ?? [])])
  if (groups.has(st.gid)) return (st.mode & 0o040) === 0
  return (st.mode & 0o004) === 0
}

const symlink: FileRead = { ok: false, reason: "symlink", detail: "a symbolic link; its target was not touched" }
const vanished: FileRead = { ok: false, reason: "vanished", detail: "no longer in processing/" }
const tooLarge = (detail: string): FileRead => ({ ok: false, reason: "too-large", detail })

/** What a file of `size` bytes is where at most `maxBytes` are read: too-large, unread. */
export function tooLargeRead(size: number, maxBytes: number): FileRead {
  return tooLarge(`${size} bytes, over the ${maxBytes}-byte limit`)
}

function kindOf(st: fs.Stats): string {
  if (st.isDirectory()) return "a directory"
  if (st.isFIFO()) return "a FIFO (named pipe)"
  if (st.isSocket()) return "a socket"
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device"
  return "not a regular file"
}

/** Flushes a directory's entries to disk: a rename is durable only after this (the Maildir rule). */
export function fsyncDir(fd: number): void {
  fs.fsyncSync(fd)
}

/** Fsyncs the directory at `path` (opened and closed for it): its entries are durable when this returns. */
export function fsyncDirAt(path: string): void {
  const fd = openDir(path)
  try {
    fsyncDir(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/** Removes `dir/name` (a link itself, never its target) and fsyncs `dir`, so the removal is durable when this returns. */
export function unlinkDurably(dir: string, name: string): void {
  fs.unlinkSync(join(dir, name))
  const fd = openDir(dir)
  try {
    fsyncDir(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/** Opens a directory for fsync; the descriptor is kept for the run. */
export function openDir(path: string): number {
  return fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
}
