import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { SpoolError } from "../errors.ts"
import { writeFileAtomic } from "./atomic-write.ts"
import { isSameFile, openDir, renameNoReplace, renameNoReplaceAt } from "./files.ts"
import { fileIdentity, hashFile, isFileIdentity } from "./hash-file.ts"

async function tempDir(): Promise<{ path: string } & AsyncDisposable> {
  const path = fs.mkdtempSync(join(os.tmpdir(), "spool-files-"))
  return { path, [Symbol.asyncDispose]: async () => fs.rmSync(path, { recursive: true, force: true }) }
}

describe("renameNoReplace", () => {
  it("moves a file to a free name", async () => {
    await using d = await tempDir()
    fs.writeFileSync(join(d.path, "a"), "A")
    expect(renameNoReplace(join(d.path, "a"), join(d.path, "b"))).toBe("moved")
    expect(fs.readdirSync(d.path)).toEqual(["b"])
    expect(fs.readFileSync(join(d.path, "b"), "utf8")).toBe("A")
  })

  it("never replaces an existing file, and both keep their bytes", async () => {
    await using d = await tempDir()
    fs.writeFileSync(join(d.path, "a"), "A")
    fs.writeFileSync(join(d.path, "b"), "B")
    expect(renameNoReplace(join(d.path, "a"), join(d.path, "b"))).toBe("exists")
    expect(fs.readFileSync(join(d.path, "a"), "utf8")).toBe("A")
    expect(fs.readFileSync(join(d.path, "b"), "utf8")).toBe("B")
  })

  it("does not replace an empty directory either", async () => {
    await using d = await tempDir()
    fs.writeFileSync(join(d.path, "a"), "A")
    fs.mkdirSync(join(d.path, "b"))
    expect(renameNoReplace(join(d.path, "a"), join(d.path, "b"))).toBe("exists")
    expect(fs.statSync(join(d.path, "b")).isDirectory()).toBe(true)
  })

  it("reports missing when the source is gone", async () => {
    await using d = await tempDir()
    expect(renameNoReplace(join(d.path, "nope"), join(d.path, "b"))).toBe("missing")
    expect(fs.readdirSync(d.path)).toEqual([])
  })

  it("throws an io error when the destination directory does not exist", async () => {
    await using d = await tempDir()
    fs.writeFileSync(join(d.path, "a"), "A")
    expect(() => renameNoReplace(join(d.path, "a"), join(d.path, "no", "b"))).toThrow(SpoolError)
    expect(fs.readFileSync(join(d.path, "a"), "utf8")).toBe("A")
  })

  it("says a name is too long, not that the disk failed, when the destination name passes 255 bytes", async () => {
    await using d = await tempDir()
    fs.writeFileSync(join(d.path, "a"), "A")
    const long = `${"x".repeat(250)}.json`
    let message = ""
    try {
      renameNoReplace(join(d.path, "a"), join(d.path, `1~${long}`))
    } catch (error) {
      expect(error).toBeInstanceOf(SpoolError)
      message = (error as SpoolError).message
    }
    expect(message).toContain(
      "longer than the filesystem takes (ENAMETOOLONG: at most 255 bytes a name, 4096 a path; the name has 257 bytes)",
    )
    expect(message).not.toContain("disk")
    expect(fs.readdirSync(d.path)).toEqual(["a"])
  })

  it("moves a symbolic link as a link, leaving its target alone", async () => {
    await using d = await tempDir()
    fs.writeFileSync(join(d.path, "target"), "T")
    fs.symlinkSync(join(d.path, "target"), join(d.path, "link"))
    expect(renameNoReplace(join(d.path, "link"), join(d.path, "moved"))).toBe("moved")
    expect(fs.readlinkSync(join(d.path, "moved"))).toBe(join(d.path, "target"))
    expect(fs.readFileSync(join(d.path, "target"), "utf8")).toBe("T")
  })

  it("behaves the same through the link+unlink fallback (SPOOL_NO_RENAMEAT2=1)", async () => {
    await using d = await tempDir()
    const script = join(d.path, "fallback.ts")
    fs.writeFileSync(
      script,
      `import fs from "node:fs"
import { renameNoReplace } from ${JSON.stringify(join(import.meta.dir, "files.ts"))}
const dir = process.argv[2]
const p = (n) => dir + "/" + n
fs.writeFileSync(p("a"), "A"); fs.writeFileSync(p("b"), "B"); fs.writeFileSync(p("c"), "C")
fs.mkdirSync(p("d")); fs.symlinkSync(p("c"), p("l"))
const out = {
  moved: renameNoReplace(p("a"), p("a2")),
  exists: renameNoReplace(p("b"), p("c")),
  missing: renameNoReplace(p("gone"), p("x")),
  dir: renameNoReplace(p("d"), p("d2")),
  dirExists: renameNoReplace(p("a2"), p("d2")),
  link: renameNoReplace(p("l"), p("l2")),
}
let noDir = "returned"
try { renameNoReplace(p("b"), p("nodir/b")) } catch (e) { noDir = e.name }
const bytes = Object.fromEntries(["a2", "b", "c"].map((n) => [n, fs.readFileSync(p(n), "utf8")]))
console.log(JSON.stringify({ out, bytes, names: fs.readdirSync(dir).sort(), link: fs.readlinkSync(p("l2")), noDir }))
`,
    )
    const work = join(d.path, "w")
    fs.mkdirSync(work)
    const proc = Bun.spawn(["bun", script, work], {
      env: { ...process.env, SPOOL_NO_RENAMEAT2: "1" },
      stdout: "pipe",
      stderr: "pipe",
      stdin: "ignore",
    })
    const [stdout, stderr, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ])
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(JSON.parse(stdout)).toEqual({
      out: { moved: "moved", exists: "exists", missing: "missing", dir: "moved", dirExists: "exists", link: "moved" },
      bytes: { a2: "A", b: "B", c: "C" },
      names: ["a2", "b", "c", "d2", "l2"],
      link: join(work, "c"),
      noDir: "SpoolError",
    })
  })

  it("finishes a half-done link+unlink move (both names on one inode) in the fallback", async () => {
    await using d = await tempDir()
    fs.writeFileSync(join(d.path, "a"), "A")
    fs.linkSync(join(d.path, "a"), join(d.path, "b"))
    expect(isSameFile(join(d.path, "a"), join(d.path, "b"))).toBe(true)
    const script = join(d.path, "resume.ts")
    fs.writeFileSync(
      script,
      `import { renameNoReplace } from ${JSON.stringify(join(import.meta.dir, "files.ts"))}
console.log(renameNoReplace(process.argv[2], process.argv[3]))
`,
    )
    const proc = Bun.spawn(["bun", script, join(d.path, "a"), join(d.path, "b")], {
      env: { ...process.env, SPOOL_NO_RENAMEAT2: "1" },
      stdout: "pipe",
      stderr: "inherit",
    })
    expect(await new Response(proc.stdout).text()).toBe("moved\n")
    expect(await proc.exited).toBe(0)
    expect(fs.readdirSync(d.path).sort()).toEqual(["b", "resume.ts"])
  })
})

describe("writeFileAtomic", () => {
  it("replaces a file's content and leaves no temporary file behind", async () => {
    await using d = await tempDir()
    const path = join(d.path, "report.txt")
    fs.writeFileSync(path, "old")
    writeFileAtomic(path, "new\n")
    expect(fs.readFileSync(path, "utf8")).toBe("new\n")
    expect(fs.readdirSync(d.path)).toEqual(["report.txt"])
  })

  it("writes a stream of chunks larger than its 64 KiB buffer in order", async () => {
    await using d = await tempDir()
    const path = join(d.path, "big.txt")
    const lines = Array.from({ length: 20_000 }, (_, i) => `line ${i}\n`)
    writeFileAtomic(path, lines.values())
    expect(fs.readFileSync(path, "utf8")).toBe(lines.join(""))
  })

  it("writes an empty stream as an empty file", async () => {
    await using d = await tempDir()
    const path = join(d.path, "empty.txt")
    writeFileAtomic(path, [][Symbol.iterator]())
    expect(fs.readFileSync(path, "utf8")).toBe("")
  })

  it("sets the requested mode whatever the umask", async () => {
    await using d = await tempDir()
    const path = join(d.path, "m.txt")
    const old = process.umask(0o077)
    try {
      writeFileAtomic(path, "x")
    } finally {
      process.umask(old)
    }
    expect(fs.statSync(path).mode & 0o777).toBe(0o644)
  })

  it("keeps the old content and removes its temporary file when the stream throws", async () => {
    await using d = await tempDir()
    const path = join(d.path, "r.txt")
    fs.writeFileSync(path, "old")
    function* failing() {
      yield "partial"
      throw new Error("source failed")
    }
    expect(() => writeFileAtomic(path, failing())).toThrow("source failed")
    expect(fs.readFileSync(path, "utf8")).toBe("old")
    expect(fs.readdirSync(d.path)).toEqual(["r.txt"])
  })
})

describe("renameNoReplaceAt", () => {
  const dirs = (root: string) => {
    for (const d of ["from", "to"]) fs.mkdirSync(join(root, d))
    const from = { path: join(root, "from"), fd: openDir(join(root, "from")) }
    const to = { path: join(root, "to"), fd: openDir(join(root, "to")) }
    return {
      from,
      to,
      [Symbol.dispose]: () => {
        fs.closeSync(from.fd)
        fs.closeSync(to.fd)
      },
    }
  }

  it("moves a name between two open directories, under a new name if asked", async () => {
    await using d = await tempDir()
    using x = dirs(d.path)
    fs.writeFileSync(join(x.from.path, "a.json"), "A")
    expect(renameNoReplaceAt(x.from, "a.json", x.to, "a~1.json")).toBe("moved")
    expect(fs.readdirSync(x.from.path)).toEqual([])
    expect(fs.readFileSync(join(x.to.path, "a~1.json"), "utf8")).toBe("A")
  })

  it("never replaces, reports a vanished source, and handles names of many bytes one after another", async () => {
    await using d = await tempDir()
    using x = dirs(d.path)
    const long = `${"é".repeat(120)}.json`
    fs.writeFileSync(join(x.from.path, long), "L")
    fs.writeFileSync(join(x.from.path, "b.json"), "B1")
    fs.writeFileSync(join(x.to.path, "b.json"), "B2")
    expect(renameNoReplaceAt(x.from, long, x.to, long)).toBe("moved")
    expect(renameNoReplaceAt(x.from, "b.json", x.to, "b.json")).toBe("exists")
    expect(renameNoReplaceAt(x.from, "gone.json", x.to, "gone.json")).toBe("missing")
    expect(fs.readFileSync(join(x.to.path, long), "utf8")).toBe("L")
    expect(fs.readFileSync(join(x.from.path, "b.json"), "utf8")).toBe("B1")
    expect(fs.readFileSync(join(x.to.path, "b.json"), "utf8")).toBe("B2")
  })
})

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
