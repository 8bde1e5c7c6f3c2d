// Reading a queue directory: its entries streamed through libc's readdir (memory flat at any
// size), each a Dirent that keeps the bytes of a name that is not UTF-8, and what spool prints
// and opens for such a name.
import { CString, FFIType, type Pointer, read, toArrayBuffer } from "bun:ffi"
import fs from "node:fs"
import { join } from "node:path"
import { SpoolError } from "../errors.ts"
import { openLibc } from "./files.ts"
import { escapeUndecodable, quoteRawName } from "./names.ts"

/** Streams a directory's entries without ever holding the whole listing: memory stays flat at any queue size. */
export function* scanDir(path: string, bufferSize = 256): Generator<fs.Dirent> {
  if (libc === undefined) return yield* scanDirNode(path, bufferSize)
  const cPath = Buffer.from(`${path}\0`) // held in a variable: alive for the whole call
  const dir = libc.symbols.opendir(cPath)
  // opendir failed (ENOENT, EACCES, ...): let node:fs throw its usual error with a code.
  if (dir === null) return yield* scanDirNode(path, bufferSize)
  const errno = new Int32Array(toArrayBuffer(libc.symbols.__errno_location() as Pointer, 0, 4))
  try {
    for (;;) {
      errno[0] = 0
      const entry = libc.symbols.readdir(dir)
      if (entry === null) {
        if (errno[0] !== 0) throw new SpoolError("io", `cannot read the directory ${path}: errno ${errno[0]}`)
        return
      }
      const name = new CString(entry, DIRENT_NAME).toString()
      if (name === "." || name === "..") continue
      let kind = read.u8(entry, DIRENT_TYPE)
      if (kind === DT_UNKNOWN) kind = typeOf(join(path, name))
      // A name that is not UTF-8 comes back with U+FFFD, which opens nothing: its bytes are kept (see entryPath).
      const raw = name.includes("\uFFFD") ? nameBytes(entry as Pointer) : undefined
      yield new DirEntry(name, path, kind, raw) as unknown as fs.Dirent
    }
  } finally {
    libc.symbols.closedir(dir)
  }
}

// Bun's fs.opendirSync reads the whole directory at the first read (measured on Bun 1.4.5:
// every getdents64 call happens before the first entry is returned), so the streaming
// promise above needs libc's opendir/readdir, which read one 32 KiB buffer at a time.
// The library object itself is kept and called through: see openLibc.
const libc = openLibc({
  opendir: { args: [FFIType.ptr], returns: FFIType.ptr },
  readdir: { args: [FFIType.ptr], returns: FFIType.ptr },
  closedir: { args: [FFIType.ptr], returns: FFIType.i32 },
  __errno_location: { args: [], returns: FFIType.ptr },
})

// struct dirent on Linux (glibc and musl, 64-bit): d_ino 8, d_off 8, d_reclen 2, d_type 1, d_name.
const DIRENT_RECLEN = 16
const DIRENT_TYPE = 18
const DIRENT_NAME = 19
const DT_UNKNOWN = 0
const DT_FIFO = 1
const DT_CHR = 2
const DT_DIR = 4
const DT_BLK = 6
const DT_REG = 8
const DT_LNK = 10
const DT_SOCK = 12

/** The bytes of an entry's name, read within its record (d_reclen), up to its NUL. */
function nameBytes(entry: Pointer): Buffer {
  const field = new Uint8Array(toArrayBuffer(entry, DIRENT_NAME, read.u16(entry, DIRENT_RECLEN) - DIRENT_NAME))
  return Buffer.from(field.subarray(0, field.indexOf(0) < 0 ? field.length : field.indexOf(0)))
}

const rawOf = (e: fs.Dirent): Buffer | undefined => (e as unknown as { raw?: Buffer }).raw

/** The path that opens a scanned entry: from its bytes for a name that is not UTF-8 (node:fs's fallback keeps none). */
export function entryPath(dir: string, e: fs.Dirent): string | Buffer {
  const raw = rawOf(e)
  return raw === undefined ? join(dir, e.name) : Buffer.concat([Buffer.from(`${dir}/`), raw])
}

/** The name to print for a scanned entry: a name that is not UTF-8 in its %XX spelling (names.ts). */
export function entryName(e: fs.Dirent): string {
  const raw = rawOf(e)
  return (raw === undefined ? undefined : escapeUndecodable(raw)) ?? e.name
}

/** A scanned entry's name quoted for a shell when it is not UTF-8 (quoteRawName); undefined when it is. */
export function entryShellName(e: fs.Dirent): string | undefined {
  const raw = rawOf(e)
  return raw === undefined || escapeUndecodable(raw) === undefined ? undefined : quoteRawName(raw)
}

/** Some filesystems report no type in readdir; lstat fills it in (0 when the entry is gone). */
function typeOf(path: string): number {
  try {
    const st = fs.lstatSync(path)
    if (st.isFile()) return DT_REG
    if (st.isDirectory()) return DT_DIR
    if (st.isSymbolicLink()) return DT_LNK
    if (st.isFIFO()) return DT_FIFO
    if (st.isSocket()) return DT_SOCK
    if (st.isCharacterDevice()) return DT_CHR
    if (st.isBlockDevice()) return DT_BLK
  } catch {}
  return DT_UNKNOWN
}

/** The fs.Dirent surface spool uses, for entries read through libc. */
class DirEntry {
  constructor(
    readonly name: string,
    readonly parentPath: string,
    readonly kind: number,
    readonly raw: Buffer | undefined, // the name's bytes, when they are not UTF-8
  ) {}
  get path(): string {
    return this.parentPath
  }
  isFile(): boolean {
    return this.kind === DT_REG
  }
  isDirectory(): boolean {
    return this.kind === DT_DIR
  }
  isSymbolicLink(): boolean {
    return this.kind === DT_LNK
  }
  isFIFO(): boolean {
    return this.kind === DT_FIFO
  }
  isSocket(): boolean {
    return this.kind === DT_SOCK
  }
  isCharacterDevice(): boolean {
    return this.kind === DT_CHR
  }
  isBlockDevice(): boolean {
    return this.kind === DT_BLK
  }
}

function* scanDirNode(path: string, bufferSize: number): Generator<fs.Dirent> {
  const dir = fs.opendirSync(path, { bufferSize })
  try {
    for (let e = dir.readSync(); e !== null; e = dir.readSync()) yield e
  } finally {
    dir.closeSync()
  }
}
