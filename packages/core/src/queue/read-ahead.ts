// Read-ahead for a batch whose files are not in memory. A file that sat in inbox/ for a while
// (dropped hours ago, or its pages reclaimed since) is read from the disk, and a read waits for
// it: one file at a time, each read pays the device's latency. The I/O thread probes a few of a
// batch's files right after moving them into processing/, with a read that may not wait for
// the disk (preadv2 RWF_NOWAIT); if one is not in memory, it asks the kernel to start reading
// every file of the batch (posix_fadvise WILLNEED), so the reads that follow find them arriving
// together instead of waiting for them one by one. A warm batch costs the probes only. Nothing
// here changes what is read or decided: a probe or hint that fails, or a kernel without these
// calls, leaves the reads as they were.
import { FFIType, ptr } from "bun:ffi"
import fs from "node:fs"
import { errnoOfLibc, type OpenDir, openLibc, putCString } from "./files.ts"

const O_CLOEXEC = 0o2000000
// O_NONBLOCK: a FIFO put in place of a file after readdir is never waited on.
const O_PROBE = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK | O_CLOEXEC
const RWF_NOWAIT = 0x8
const POSIX_FADV_WILLNEED = 3
const EAGAIN = 11
const EINVAL = 22
const EOPNOTSUPP = 95
/** How many of a batch's files are probed, spread over the batch. */
const PROBES = 4

/**
 * libc's calls and the fixed memory they are given, in one object that every call goes
 * through: whatever is only reachable from a pointer taken once is garbage to the collector,
 * and a collected library loses its functions, a collected buffer its memory.
 */
const native = (() => {
  if (process.env.SPOOL_NO_READ_AHEAD === "1") return undefined
  const library = openLibc({
    openat: { args: [FFIType.i32, FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
    // An int is enough (it returns -1, 0 or 1 here), and makes no BigInt before errno is read.
    preadv2: { args: [FFIType.i32, FFIType.ptr, FFIType.i32, FFIType.i64, FFIType.i32], returns: FFIType.i32 },
    posix_fadvise: { args: [FFIType.i32, FFIType.i64, FFIType.i64, FFIType.i32], returns: FFIType.i32 },
    close: { args: [FFIType.i32], returns: FFIType.i32 },
    __errno_location: { args: [], returns: FFIType.ptr },
  })
  if (library === undefined) return undefined
  // The name as a C string; one iovec for the probe's one byte, which is read past it.
  const name = Buffer.alloc(4096)
  const probeMemory = Buffer.alloc(4096)
  const iovec = ptr(probeMemory)
  probeMemory.writeBigUInt64LE(BigInt(iovec + 64), 0)
  probeMemory.writeBigUInt64LE(1n, 8)
  return { library, name, namePtr: ptr(name), probeMemory, iovec }
})()

/** Whether probes still make sense: false once the kernel or filesystem turned them down. */
let isProbing = native !== undefined

/**
 * After a batch has moved into processing/: probes a few of `names` (regular files, by
 * readdir) and, if one's first page is not in memory, starts the kernel reading each of them,
 * up to `maxBytes` a file. Returns how many files it started reading (0 for a warm batch).
 */
export function readAheadIfCold(dir: OpenDir, names: readonly string[], maxBytes: number): number {
  if (!isProbing || names.length === 0) return 0
  const step = Math.max(1, Math.floor(names.length / PROBES))
  let cold = false
  for (let i = 0; i < names.length && !cold; i += step) cold = probe(dir, names[i] as string, maxBytes) === "cold"
  if (!cold) return 0
  let started = 0
  for (const name of names) if (withFile(dir, name, (fd) => willNeed(fd, maxBytes))) started++
  return started
}

/** "cold" (and its read started) when the file's first byte is not in memory; else "warm". */
export function probe(dir: OpenDir, name: string, maxBytes: number): "warm" | "cold" | "unknown" {
  let answer: "warm" | "cold" | "unknown" = "unknown"
  withFile(dir, name, (fd) => {
    const n = native?.library.symbols.preadv2(fd, native.iovec, 1, 0, RWF_NOWAIT) ?? -1
    if (n >= 0) answer = "warm"
    else {
      const e = native === undefined ? 0 : errnoOfLibc(native.library)
      if (e === EAGAIN) {
        answer = "cold"
        willNeed(fd, maxBytes)
      }
      // EOPNOTSUPP, EINVAL: this kernel or filesystem cannot tell, and never will.
      else if (e === EOPNOTSUPP || e === EINVAL) isProbing = false
    }
    return true
  })
  return answer
}

function willNeed(fd: number, maxBytes: number): boolean {
  return native?.library.symbols.posix_fadvise(fd, 0, maxBytes, POSIX_FADV_WILLNEED) === 0
}

/** Runs `use` on the file opened for reading; false when it cannot be opened (gone, a link, ...). */
function withFile(dir: OpenDir, name: string, use: (fd: number) => boolean): boolean {
  if (native === undefined || !putCString(native.name, name)) return false
  const fd = native.library.symbols.openat(dir.fd, native.namePtr, O_PROBE)
  if (fd < 0) return false
  try {
    return use(fd)
  } finally {
    native.library.symbols.close(fd)
  }
}
