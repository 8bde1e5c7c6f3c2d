import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join, resolve } from "node:path"
import { SpoolError } from "../errors.ts"
import { createQueue, isMessageName, judgeEntry, openQueue, queueDirs, queuePaths, resolveRoot } from "./root.ts"
import { scanDir } from "./scan.ts"

async function tempDir(): Promise<{ path: string } & AsyncDisposable> {
  const path = fs.mkdtempSync(join(os.tmpdir(), "spool-queue-"))
  return { path, [Symbol.asyncDispose]: async () => fs.rmSync(path, { recursive: true, force: true }) }
}

function thrown(fn: () => unknown): SpoolError {
  try {
    fn()
  } catch (error) {
    if (error instanceof SpoolError) return error
    throw error
  }
  throw new Error("expected a SpoolError, nothing was thrown")
}

describe("resolveRoot", () => {
  it.each([
    ["--root wins over SPOOL_ROOT", "/flag", { SPOOL_ROOT: "/env" }, "/flag"],
    ["SPOOL_ROOT is used without --root", undefined, { SPOOL_ROOT: "/env" }, "/env"],
    ["./spool is the default", undefined, {}, resolve("spool")],
    ["an empty SPOOL_ROOT counts as unset", undefined, { SPOOL_ROOT: "" }, resolve("spool")],
    ["a relative --root is taken from the working directory", "rel/q", { SPOOL_ROOT: "/env" }, resolve("rel/q")],
    ["a relative SPOOL_ROOT is taken from the working directory", undefined, { SPOOL_ROOT: "q2" }, resolve("q2")],
  ] as const)("%s", (_, flag, env, expected) => {
    expect(resolveRoot(flag, env)).toBe(expected)
  })

  it("finds the queue root the working directory is in, itself or below it, as git finds its repository", async () => {
    await using d = await tempDir()
    const root = join(d.path, "q")
    createQueue(root)
    fs.mkdirSync(join(root, "error", "sub"))
    expect(resolveRoot(undefined, {}, root)).toBe(root)
    expect(resolveRoot(undefined, {}, join(root, "error"))).toBe(root)
    expect(resolveRoot(undefined, {}, join(root, "error", "sub"))).toBe(root)
    // Outside any root: ./spool of the working directory, as before.
    expect(resolveRoot(undefined, {}, d.path)).toBe(join(d.path, "spool"))
    // An explicit root still wins over the one the working directory is in.
    expect(resolveRoot(undefined, { SPOOL_ROOT: "/env" }, root)).toBe("/env")
  })
})

describe("openQueue", () => {
  it("returns the absolute paths of a complete queue", async () => {
    await using d = await tempDir()
    createQueue(join(d.path, "q"))
    const q = openQueue(join(d.path, "q"))
    expect(q).toMatchObject(queuePaths(join(d.path, "q")))
    expect(q.ledger).toBe(join(d.path, "q", "ledger.db"))
  })

  it("says the root is not a queue and names bun run setup when it does not exist", async () => {
    await using d = await tempDir()
    const e = thrown(() => openQueue(join(d.path, "nothing")))
    expect(e.code).toBe("not-a-queue")
    expect(e.message).toContain("inbox/ is missing")
    expect(e.message).toContain(`bun run setup --root ${join(d.path, "nothing")}`)
  })

  it.each(queueDirs.filter((d) => d !== "deferred"))(
    "names %s/ when only that directory is missing",
    async (missing) => {
      await using d = await tempDir()
      const q = createQueue(join(d.path, "q"))
      fs.rmSync(q[missing], { recursive: true })
      const e = thrown(() => openQueue(q.root))
      expect(e.code).toBe("not-a-queue")
      expect(e.message).toContain(`${missing}/ is missing`)
    },
  )

  it("creates deferred/ in a root made before it existed", async () => {
    await using d = await tempDir()
    const q = createQueue(join(d.path, "q"))
    fs.rmSync(q.deferred, { recursive: true })
    openQueue(q.root)
    expect(fs.lstatSync(q.deferred).isDirectory()).toBe(true)
  })

  it("says a root that is a regular file is not a queue", async () => {
    await using d = await tempDir()
    fs.writeFileSync(join(d.path, "file"), "")
    const e = thrown(() => openQueue(join(d.path, "file")))
    expect(e.code).toBe("not-a-queue")
    expect(e.message).toContain("bun run setup")
  })

  it("refuses a queue directory that is a regular file", async () => {
    await using d = await tempDir()
    const q = createQueue(join(d.path, "q"))
    fs.rmSync(q.done, { recursive: true })
    fs.writeFileSync(q.done, "")
    const e = thrown(() => openQueue(q.root))
    expect(e.code).toBe("not-a-queue")
    expect(e.message).toBe(`${q.done} is not a directory`)
  })
})

describe("createQueue", () => {
  it("creates the five directories and tmp/, and is idempotent", async () => {
    await using d = await tempDir()
    const root = join(d.path, "a", "q")
    createQueue(root)
    fs.writeFileSync(join(root, "inbox", "keep.json"), "{}")
    createQueue(root)
    expect(fs.readdirSync(root).sort()).toEqual(["deferred", "done", "error", "inbox", "processing", "tmp"])
    expect(fs.readdirSync(join(root, "inbox"))).toEqual(["keep.json"])
  })
})

describe("a queue directory that is a symbolic link", () => {
  const linkable = [...queueDirs, "tmp"] as const

  it.each(linkable)(
    "refuses %s/ linked to a directory outside the root, naming the link, its target and the fix",
    async (d) => {
      await using t = await tempDir()
      const q = createQueue(join(t.path, "q"))
      const outside = join(t.path, "outside")
      fs.mkdirSync(outside)
      fs.writeFileSync(join(outside, "sentinel.json"), "{}")
      fs.rmSync(q[d], { recursive: true })
      fs.symlinkSync(outside, q[d])
      for (const open of [openQueue, createQueue]) {
        const e = thrown(() => open(q.root))
        expect(e.code).toBe("not-a-queue")
        expect(e.message).toStartWith(`${q.root} is not a queue: ${q[d]} is a symbolic link to ${outside}`)
        expect(e.message).toContain(`rm ${q[d]} && mkdir ${q[d]}`)
        expect(e.message).toContain("make the root itself the link")
      }
      expect(fs.readdirSync(outside)).toEqual(["sentinel.json"])
    },
  )

  it("refuses a link whose target is missing or a file, before saying anything is missing", async () => {
    await using t = await tempDir()
    const q = queuePaths(join(t.path, "q"))
    fs.mkdirSync(q.root)
    fs.symlinkSync(join(t.path, "nowhere"), q.error)
    fs.writeFileSync(join(t.path, "file"), "")
    fs.symlinkSync(join(t.path, "file"), q.done)
    expect(thrown(() => openQueue(q.root)).message).toContain(`${q.done} is a symbolic link to ${join(t.path, "file")}`)
    fs.rmSync(q.done)
    expect(thrown(() => openQueue(q.root)).message).toContain(
      `${q.error} is a symbolic link to ${join(t.path, "nowhere")}`,
    )
  })

  it("creates nothing when setup meets a linked directory among missing ones", async () => {
    await using t = await tempDir()
    const root = join(t.path, "q")
    fs.mkdirSync(join(t.path, "outside"))
    fs.mkdirSync(root)
    fs.symlinkSync(join(t.path, "outside"), join(root, "error"))
    expect(thrown(() => createQueue(root)).code).toBe("not-a-queue")
    expect(fs.readdirSync(root)).toEqual(["error"])
    expect(fs.readdirSync(join(t.path, "outside"))).toEqual([])
  })

  it("quotes a link and a target whose names need it", async () => {
    await using t = await tempDir()
    const q = createQueue(join(t.path, "q"))
    fs.rmSync(q.inbox, { recursive: true })
    fs.symlinkSync("../out\nside", q.inbox)
    expect(thrown(() => openQueue(q.root)).message).toContain(`${q.inbox} is a symbolic link to '../out'$'\\n''side'`)
  })

  it("accepts a root that is itself a symbolic link, and keeps the path as given", async () => {
    await using t = await tempDir()
    const real = createQueue(join(t.path, "real"))
    fs.symlinkSync(real.root, join(t.path, "link"))
    const q = openQueue(join(t.path, "link"))
    expect(q).toMatchObject(queuePaths(join(t.path, "link")))
    expect(createQueue(join(t.path, "link"))).toEqual(q)
  })
})

describe("createQueue in the way of a file", () => {
  it("says a root that is a file is not a queue", async () => {
    await using d = await tempDir()
    fs.writeFileSync(join(d.path, "file"), "")
    const e = thrown(() => createQueue(join(d.path, "file")))
    expect(e.code).toBe("not-a-queue")
    expect(e.message).toContain(join(d.path, "file", "inbox"))
  })

  it("says a queue directory taken by a file is not a queue, and leaves the file alone", async () => {
    await using d = await tempDir()
    fs.mkdirSync(join(d.path, "q"))
    fs.writeFileSync(join(d.path, "q", "done"), "keep")
    const e = thrown(() => createQueue(join(d.path, "q")))
    expect(e.code).toBe("not-a-queue")
    expect(e.message).toContain("a file of that name is in the way")
    expect(fs.readFileSync(join(d.path, "q", "done"), "utf8")).toBe("keep")
  })
})

describe("isMessageName", () => {
  it.each([
    ["a.json", true],
    ["a.JSON", false],
    ["a.json.tmp", false],
    [".a.json", false],
    ["json", false],
    [".json", false],
    ["a.txt", false],
  ] as const)("%s -> %p", (name, expected) => {
    expect(isMessageName(name)).toBe(expected)
  })
})

describe("judgeEntry", () => {
  const hour = 3_600_000
  it.each([
    ["an old message", "a.json", -hour, 600_000, "take"],
    ["any message without --min-age", "a.json", 0, 0, "take"],
    ["a message written just now", "a.json", 0, 600_000, "too-young"],
    ["a message whose mtime is in the future, by its ctime", "a.json", 365 * 24 * hour, 600_000, "too-young"],
    ["a hidden name", ".a.json", -hour, 0, "not-a-message"],
    ["a name not ending in .json", "a.json.part", -hour, 0, "not-a-message"],
    ["a name that is not a message at all", "notes.txt", -hour, 0, "not-a-message"],
  ] as const)("%s: %s", async (_label, name, mtimeOffset, minAgeMs, expected) => {
    await using d = await tempDir()
    fs.writeFileSync(join(d.path, name), "{}")
    const t = new Date(Date.now() + mtimeOffset)
    fs.utimesSync(join(d.path, name), t, t)
    expect(judgeEntry(d.path, name, minAgeMs, Date.now())).toBe(expected)
  })

  it("takes a directory named *.json (it goes to error/ unopened) and leaves an undecodable name", async () => {
    await using d = await tempDir()
    fs.mkdirSync(join(d.path, "d.json"))
    fs.writeFileSync(Buffer.concat([Buffer.from(`${d.path}/a`), Buffer.of(0xff), Buffer.from(".json")]), "")
    const names = fs.readdirSync(d.path).sort()
    expect(names.map((n) => judgeEntry(d.path, n, 0, Date.now()))).toEqual(["undecodable", "take"])
  })
})

describe("scanDir", () => {
  it("yields every entry of a directory larger than its buffer", async () => {
    await using d = await tempDir()
    for (let i = 0; i < 300; i++) fs.writeFileSync(join(d.path, `${i}.json`), "")
    fs.mkdirSync(join(d.path, "sub"))
    const names = [...scanDir(d.path, 7)].map((e) => e.name)
    expect(names).toHaveLength(301)
    expect(new Set(names).size).toBe(301)
    expect(names).toContain("sub")
  })

  it("is lazy and closes the directory when the caller stops early", async () => {
    await using d = await tempDir()
    for (let i = 0; i < 50; i++) fs.writeFileSync(join(d.path, `${i}.json`), "")
    // The descriptors this process holds on the directory itself.
    const held = () =>
      fs.readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return fs.readlinkSync(`/proc/self/fd/${fd}`) === d.path
        } catch {
          return false
        }
      }).length
    expect(held()).toBe(0)
    const it = scanDir(d.path, 4)
    expect(it.next().done).toBe(false)
    // Still open after the first entry: the rest has not been read yet.
    expect(held()).toBe(1)
    it.return(undefined)
    expect(held()).toBe(0)
    for (const _ of scanDir(d.path, 4)) break
    expect(held()).toBe(0)
  })

  it("names entries as node:fs does, with U+FFFD for bytes that are not UTF-8, and types them", async () => {
    await using d = await tempDir()
    fs.writeFileSync(Buffer.concat([Buffer.from(`${d.path}/a`), Buffer.from([0xff]), Buffer.from(".json")]), "")
    fs.writeFileSync(join(d.path, "é.json"), "")
    fs.mkdirSync(join(d.path, "dir.json"))
    fs.symlinkSync("é.json", join(d.path, "link.json"))
    const seen = [...scanDir(d.path)].map((e) => [e.name, e.isFile(), e.isDirectory(), e.isSymbolicLink()])
    expect(seen.sort()).toEqual([
      ["a\uFFFD.json", true, false, false],
      ["dir.json", false, true, false],
      ["link.json", false, false, true],
      ["é.json", true, false, false],
    ])
    expect(seen.map(([n]) => n).sort()).toEqual(fs.readdirSync(d.path).sort())
  })

  it("throws for a directory that does not exist", async () => {
    await using d = await tempDir()
    expect(() => [...scanDir(join(d.path, "missing"))]).toThrow()
  })
})
