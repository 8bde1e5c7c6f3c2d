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
