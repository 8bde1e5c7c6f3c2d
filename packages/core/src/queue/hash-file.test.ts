import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { openDir } from "./files.ts"
import { fileIdentity, hashFile, isFileIdentity } from "./hash-file.ts"

async function tempDir(): Promise<{ path: string } & AsyncDisposable> {
  const path = fs.mkdtempSync(join(os.tmpdir(), "spool-hash-file-"))
  return { path, [Symbol.asyncDispose]: async () => fs.rmSync(path, { recursive: true, force: true }) }
}

describe("fileIdentity", () => {
  it("stays the file's own while it keeps its inode, and tells it from a later file of its name", async () => {
    await using d = await tempDir()
    const dir = { path: d.path, fd: openDir(d.path) }
    try {
      const at = 1_790_000_000 // one whole second for both files: only their inodes differ
      fs.writeFileSync(join(d.path, "a.json"), "x".repeat(500))
      fs.utimesSync(join(d.path, "a.json"), at, at)
      const first = fileIdentity(dir, "a.json") as string
      expect(isFileIdentity(first)).toBe(true)
      expect(fileIdentity(dir, "a.json")).toBe(first)
      // The earlier file leaves (it lives on, elsewhere); a new one of the same size and times takes its name.
      fs.renameSync(join(d.path, "a.json"), join(d.path, "left.json"))
      fs.writeFileSync(join(d.path, "a.json"), "y".repeat(500))
      fs.utimesSync(join(d.path, "a.json"), at, at)
      expect(fileIdentity(dir, "a.json")).not.toBe(first)
      expect(fileIdentity(dir, "gone.json")).toBeUndefined()
    } finally {
      fs.closeSync(dir.fd)
    }
  })

  it("is a symbolic link's own, never its target's, and never a sha256", async () => {
    await using d = await tempDir()
    const dir = { path: d.path, fd: openDir(d.path) }
    try {
      fs.writeFileSync(join(d.path, "target"), "{}")
      fs.symlinkSync(join(d.path, "target"), join(d.path, "link.json"))
      const link = fileIdentity(dir, "link.json") as string
      expect(link).not.toBe(fileIdentity(dir, "target"))
      expect(link.startsWith(`lstat:${fs.lstatSync(join(d.path, "link.json")).ino}:`)).toBe(true)
      expect(hashFile(dir, "link.json")).toBeUndefined()
      expect(isFileIdentity(hashFile(dir, "target") as string)).toBe(false)
    } finally {
      fs.closeSync(dir.fd)
    }
  })
})
