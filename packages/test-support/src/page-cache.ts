// Files made cold: their pages dropped from the page cache, so the next read goes to the disk,
// as for a file written long ago. For the read-ahead's tests and the bench's --cold runs.
import { dlopen, FFIType } from "bun:ffi"

const libc = dlopen("libc.so.6", {
  posix_fadvise: { args: [FFIType.i32, FFIType.i64, FFIType.i64, FFIType.i32], returns: FFIType.i32 },
})
const POSIX_FADV_DONTNEED = 4

/**
 * Drops the open file's pages from the page cache (the clean ones: sync or fsync it first).
 * Returns 0, or posix_fadvise's error number. tmpfs keeps the pages whatever this says.
 */
export function dropPages(fd: number): number {
  return libc.symbols.posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
}
