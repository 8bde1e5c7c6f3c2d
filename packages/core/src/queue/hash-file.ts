// What tells a file in processing/ from another that had its name before: recovery asks it of
// a committed claim's file before moving it on (consume/recover.ts, isCommittedFile), since a
// power cut can bring back the claim of a file that has left, over a new file of its name.
import fs from "node:fs"
import { join } from "node:path"
import { O_READ, type OpenDir } from "./files.ts"

/**
 * The sha256 (hex) of a regular file's whole content, read in pieces with no size limit (what
 * a consumer hashes is at most --max-bytes, but the limit may have changed since, and a landed
 * broker body has none); undefined when `dir` holds no regular file of that name. Never opens
 * a FIFO, a device or a symbolic link's target. I/O errors throw.
 */
export function hashFile(dir: OpenDir, name: string): string | undefined {
  let fd: number
  try {
    fd = fs.openSync(join(dir.path, name), O_READ)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "ENOENT" || code === "ELOOP" || code === "ENXIO") return undefined
    throw error
  }
  try {
    if (!fs.fstatSync(fd).isFile()) return undefined
    const hasher = new Bun.CryptoHasher("sha256")
    const buffer = Buffer.allocUnsafe(64 * 1024)
    for (let n = fs.readSync(fd, buffer); n > 0; n = fs.readSync(fd, buffer)) hasher.update(buffer.subarray(0, n))
    return hasher.digest("hex")
  } finally {
    fs.closeSync(fd)
  }
}

const identityPrefix = "lstat:"

/**
 * Who a file is, for one judged without reading its bytes (a symbolic link, a FIFO, a file over
 * --max-bytes): its inode number, size and modification time, as lstat gives them, never
 * following a link; undefined when `dir` holds nothing of that name. Two files with one name
 * have different inodes while both exist, and the earlier one still exists in error/ when the
 * cut's stale claim is found. The device number is left out: some file systems (NFS, say) get
 * a new one at each mount, while their inode numbers last. Where inode numbers do not last
 * either (a FUSE file system without use_ino, CIFS with noserverino), the same file looks new
 * after a remount: it is judged again, and goes to error/ again with a second failures row.
 */
export function fileIdentity(dir: OpenDir, name: string): string | undefined {
  const st = fs.lstatSync(join(dir.path, name), { bigint: true, throwIfNoEntry: false })
  return st === undefined ? undefined : `${identityPrefix}${st.ino}:${st.size}:${st.mtimeNs}`
}

/** Whether a claim's record of its file is a fileIdentity rather than a sha256. */
export const isFileIdentity = (recorded: string): boolean => recorded.startsWith(identityPrefix)
