// Files written whole or not at all: a temp file beside the target, fsynced, renamed into place,
// the directory fsynced. Reports, metrics textfiles and a root's binding record are written so.
import fs from "node:fs"
import { basename, dirname, join } from "node:path"
import { errnoOf, SpoolError } from "../errors.ts"
import { openDir, renameNoReplace } from "./files.ts"

/**
 * Writes a file so that readers see either the old or the new content, never a torn one:
 * temp file in the same directory, fsync, rename over, fsync the directory. `data` may be a
 * stream of chunks, written in 64 KiB pieces, so a large report never sits whole in memory.
 */
export function writeFileAtomic(path: string, data: string | Iterable<string>, mode = 0o644): void {
  writeFileAtomicOr(path, data, mode, true)
}

/**
 * `writeFileAtomic` unless `path` exists: of several processes creating it at once, exactly
 * one does. Returns false, writing nothing, when the name was taken.
 */
export function createFileAtomic(path: string, data: string, mode = 0o644): boolean {
  return writeFileAtomicOr(path, data, mode, false)
}

function writeFileAtomicOr(path: string, data: string | Iterable<string>, mode: number, isReplacing: boolean): boolean {
  try {
    return writeAndRename(path, data, mode, isReplacing)
  } catch (error) {
    const code = errnoOf(error)
    if (error instanceof SpoolError || code === undefined) throw error
    const fix =
      code === "ENOSPC" || code === "EDQUOT"
        ? "the disk is full: free space"
        : code === "EACCES" || code === "EPERM" || code === "EROFS"
          ? `give this user write access to ${dirname(path)}`
          : "fix the cause"
    throw new SpoolError("io", `cannot write ${path} (${code}); ${fix}, then run the command again`, { cause: error })
  }
}

const O_REPLACE = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | fs.constants.O_NOFOLLOW

function writeAndRename(path: string, data: string | Iterable<string>, mode: number, isReplacing: boolean): boolean {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`)
  // O_NOFOLLOW: a link planted under the temp name must not redirect the write out of the root.
  const fd = fs.openSync(tmp, O_REPLACE, mode)
  try {
    fs.fchmodSync(fd, mode)
    if (typeof data === "string") fs.writeSync(fd, data)
    else {
      let buffered = ""
      for (const chunk of data) {
        buffered += chunk
        if (buffered.length >= 65536) {
          fs.writeSync(fd, buffered)
          buffered = ""
        }
      }
      if (buffered.length > 0) fs.writeSync(fd, buffered)
    }
    fs.fsyncSync(fd)
  } catch (error) {
    fs.closeSync(fd)
    fs.rmSync(tmp, { force: true })
    throw error
  }
  fs.closeSync(fd)
  try {
    if (isReplacing) fs.renameSync(tmp, path)
    else if (renameNoReplace(tmp, path) === "exists") {
      fs.rmSync(tmp, { force: true })
      return false
    }
  } catch (error) {
    fs.rmSync(tmp, { force: true })
    throw error
  }
  const dfd = openDir(dirname(path))
  try {
    fs.fsyncSync(dfd)
  } finally {
    fs.closeSync(dfd)
  }
  return true
}
