import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { SpoolError } from "../errors.ts"
import { enqueueBytes, seedFrom } from "./enqueue.ts"
import { createQueue, type Queue } from "./root.ts"

interface Fixture extends AsyncDisposable {
  readonly q: Queue
  /** A directory outside the queue to seed from. */
  readonly src: string
}

async function fixture(): Promise<Fixture> {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-enqueue-"))
  const src = join(dir, "src")
  fs.mkdirSync(src)
  return {
    q: createQueue(join(dir, "q")),
    src,
    [Symbol.asyncDispose]: async () => fs.rmSync(dir, { recursive: true, force: true }),
  }
}

const ls = (dir: string) => fs.readdirSync(dir).sort()

describe("enqueueBytes", () => {
  it("puts the bytes into inbox/ and leaves nothing in tmp/", async () => {
    await using f = await fixture()
    expect(enqueueBytes(f.q, "a.json", '{"x":1}')).toBe(true)
    expect(enqueueBytes(f.q, "b.json", new Uint8Array([0x7b, 0x7d]), false)).toBe(true)
    expect(ls(f.q.inbox)).toEqual(["a.json", "b.json"])
    expect(fs.readFileSync(join(f.q.inbox, "a.json"), "utf8")).toBe('{"x":1}')
    expect(fs.readFileSync(join(f.q.inbox, "b.json"), "utf8")).toBe("{}")
    expect(ls(f.q.tmp)).toEqual([])
  })

  it("returns false and keeps the existing file's bytes when the name is taken", async () => {
    await using f = await fixture()
    enqueueBytes(f.q, "a.json", "first")
    expect(enqueueBytes(f.q, "a.json", "second")).toBe(false)
    expect(fs.readFileSync(join(f.q.inbox, "a.json"), "utf8")).toBe("first")
    expect(ls(f.q.tmp)).toEqual([])
  })

  it("writes an empty message as an empty file", async () => {
    await using f = await fixture()
    expect(enqueueBytes(f.q, "e.json", "")).toBe(true)
    expect(fs.statSync(join(f.q.inbox, "e.json")).size).toBe(0)
  })

  it("accepts a 255-byte name", async () => {
    await using f = await fixture()
    const name = `${"n".repeat(250)}.json`
    expect(enqueueBytes(f.q, name, "{}")).toBe(true)
    expect(ls(f.q.inbox)).toEqual([name])
    expect(ls(f.q.tmp)).toEqual([])
  })

  it.each([["a.txt"], [".hidden.json"], ["a.json.tmp"], ["sub/a.json"], ["../a.json"], [`${"n".repeat(251)}.json`]])(
    "refuses the name %p as a usage error and writes nothing",
    async (name) => {
      await using f = await fixture()
      expect(() => enqueueBytes(f.q, name, "{}")).toThrow(SpoolError)
      expect(ls(f.q.inbox)).toEqual([])
      expect(ls(f.q.tmp)).toEqual([])
    },
  )
})

describe("seedFrom", () => {
  it("copies only regular *.json files directly in the directory", async () => {
    await using f = await fixture()
    fs.writeFileSync(join(f.src, "a.json"), "A")
    fs.writeFileSync(join(f.src, "b.json"), "B")
    fs.writeFileSync(join(f.src, "c.json.tmp"), "tmp")
    fs.writeFileSync(join(f.src, "d.txt"), "txt")
    fs.writeFileSync(join(f.src, ".e.json"), "hidden")
    fs.symlinkSync(join(f.src, "a.json"), join(f.src, "link.json"))
    fs.mkdirSync(join(f.src, "sub.json"))
    fs.writeFileSync(join(f.src, "sub.json", "inner.json"), "inner")
    const s = seedFrom(f.q, f.src)
    expect(s).toEqual({ copied: 2, skipped: [] })
    expect(ls(f.q.inbox)).toEqual(["a.json", "b.json"])
    expect(fs.readFileSync(join(f.q.inbox, "b.json"), "utf8")).toBe("B")
  })

  it("skips names already anywhere in the queue and never overwrites them", async () => {
    await using f = await fixture()
    for (const n of ["in", "proc", "done", "err", "new"]) fs.writeFileSync(join(f.src, `${n}.json`), "from src")
    fs.writeFileSync(join(f.q.inbox, "in.json"), "kept")
    fs.writeFileSync(join(f.q.processing, "proc.json"), "kept")
    fs.writeFileSync(join(f.q.done, "done.json"), "kept")
    fs.writeFileSync(join(f.q.error, "err.json"), "kept")
    const s = seedFrom(f.q, f.src)
    expect(s.copied).toBe(1)
    expect(s.skipped.sort()).toEqual(["done.json", "err.json", "in.json", "proc.json"])
    expect(ls(f.q.inbox)).toEqual(["in.json", "new.json"])
    expect(fs.readFileSync(join(f.q.inbox, "in.json"), "utf8")).toBe("kept")
    expect(fs.readFileSync(join(f.q.done, "done.json"), "utf8")).toBe("kept")
  })

  it("copies nothing the second time", async () => {
    await using f = await fixture()
    fs.writeFileSync(join(f.src, "a.json"), "A")
    expect(seedFrom(f.q, f.src)).toEqual({ copied: 1, skipped: [] })
    expect(seedFrom(f.q, f.src)).toEqual({ copied: 0, skipped: ["a.json"] })
    expect(ls(f.q.inbox)).toEqual(["a.json"])
  })

  it("reads a name that is not UTF-8 by its bytes and enqueues it under its %XX spelling, once", async () => {
    await using f = await fixture()
    // "bad<FF>.json" and "caf<E9>.json" (Latin-1): no string names these files, only their bytes.
    fs.writeFileSync(Buffer.from([...Buffer.from(`${f.src}/bad`), 0xff, ...Buffer.from(".json")]), "FF")
    fs.writeFileSync(Buffer.from([...Buffer.from(`${f.src}/caf`), 0xe9, ...Buffer.from(".json")]), "E9")
    expect(seedFrom(f.q, f.src)).toEqual({ copied: 2, skipped: [] })
    expect(ls(f.q.inbox)).toEqual(["bad%FF.json", "caf%E9.json"])
    expect(fs.readFileSync(join(f.q.inbox, "bad%FF.json"), "utf8")).toBe("FF")
    expect(seedFrom(f.q, f.src)).toEqual({ copied: 0, skipped: ["bad%FF.json", "caf%E9.json"] })
  })

  it("refuses a source that does not exist or is not a directory", async () => {
    await using f = await fixture()
    expect(() => seedFrom(f.q, join(f.src, "missing"))).toThrow(/does not exist/)
    fs.writeFileSync(join(f.src, "file"), "")
    expect(() => seedFrom(f.q, join(f.src, "file"))).toThrow(/is not a directory/)
  })
})
