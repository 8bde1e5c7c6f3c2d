import { afterEach, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { dropPages } from "@spool/test-support"
import { openDir } from "./files.ts"
import { IoThread } from "./io-thread.ts"
import { probe, readAheadIfCold } from "./read-ahead.ts"
import { createQueue, type Queue } from "./root.ts"

const cleanups: (() => void)[] = []
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c()
})

/** Bytes of the file in the page cache, as util-linux's fincore counts them (without touching it). */
function resident(path: string): number {
  const r = Bun.spawnSync(["fincore", "--bytes", "--noheadings", "--output", "RES", path])
  if (r.exitCode !== 0) throw new Error(`fincore ${path}: ${r.stderr.toString()}`)
  return Number(r.stdout.toString().trim())
}

/** Writes each file, makes it durable and drops its pages: the next read must go to the disk. */
function writeCold(dir: string, files: Record<string, string>): void {
  for (const [name, text] of Object.entries(files)) {
    const path = join(dir, name)
    const fd = fs.openSync(path, "w")
    fs.writeSync(fd, text)
    fs.fsyncSync(fd)
    dropPages(fd)
    fs.closeSync(fd)
    if (resident(path) !== 0)
      throw new Error(
        `${path} stayed in memory after POSIX_FADV_DONTNEED: this filesystem (tmpfs?) cannot hold a cold file; run the tests with TMPDIR on a disk`,
      )
  }
}

function tempQueue(): Queue {
  const dir = fs.mkdtempSync(join(tmpdir(), "spool-read-ahead-"))
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }))
  return createQueue(join(dir, "q"))
}

const texts = (n: number): Record<string, string> =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`m${i}.json`, `{"i":${i}}`]))

async function untilResident(path: string): Promise<number> {
  for (const deadline = Date.now() + 3_000; Date.now() < deadline; await Bun.sleep(10)) {
    const bytes = resident(path)
    if (bytes > 0) return bytes
  }
  return 0
}

describe("probe", () => {
  it("tells a file in memory from one that is not, and starts reading the cold one", async () => {
    const q = tempQueue()
    writeCold(q.inbox, { "a.json": "{}" })
    const dir = { path: q.inbox, fd: openDir(q.inbox) }
    cleanups.push(() => fs.closeSync(dir.fd))
    expect(probe(dir, "a.json", 1024)).toBe("cold")
    expect(await untilResident(join(q.inbox, "a.json"))).toBeGreaterThan(0)
    expect(probe(dir, "a.json", 1024)).toBe("warm")
    expect(probe(dir, "gone.json", 1024)).toBe("unknown")
  })
})

describe("readAheadIfCold", () => {
  it("starts reading every file of a batch once a probe finds one cold, without reading any itself", async () => {
    const q = tempQueue()
    writeCold(q.processing, texts(12))
    const dir = { path: q.processing, fd: openDir(q.processing) }
    cleanups.push(() => fs.closeSync(dir.fd))
    const names = Object.keys(texts(12))
    expect(readAheadIfCold(dir, names, 1024)).toBe(12)
    // The last file is never probed (probes go 0, 3, 6, 9 and stop at the first cold one).
    expect(await untilResident(join(q.processing, "m11.json"))).toBeGreaterThan(0)
  })

  it("leaves a warm batch alone", () => {
    const q = tempQueue()
    for (const [name, text] of Object.entries(texts(12))) fs.writeFileSync(join(q.processing, name), text)
    const dir = { path: q.processing, fd: openDir(q.processing) }
    cleanups.push(() => fs.closeSync(dir.fd))
    expect(readAheadIfCold(dir, Object.keys(texts(12)), 1024)).toBe(0)
  })

  it("is off with SPOOL_NO_READ_AHEAD=1", () => {
    const q = tempQueue()
    writeCold(q.processing, { "a.json": "{}" })
    const script = `import { readAheadIfCold } from ${JSON.stringify(join(import.meta.dir, "read-ahead.ts"))}
import { openDir } from ${JSON.stringify(join(import.meta.dir, "files.ts"))}
const dir = ${JSON.stringify(q.processing)}
console.log(readAheadIfCold({ path: dir, fd: openDir(dir) }, ["a.json"], 1024))`
    const r = Bun.spawnSync(["bun", "-e", script], { env: { ...process.env, SPOOL_NO_READ_AHEAD: "1" } })
    expect(r.stderr.toString()).toBe("")
    expect(r.stdout.toString().trim()).toBe("0")
    expect(resident(join(q.processing, "a.json"))).toBe(0)
  })
})

describe("IoThread.claimIn on files not in memory", () => {
  it("reads the batch ahead, the FIFO and the missing name left out, and reads every byte right", async () => {
    const q = tempQueue()
    writeCold(q.inbox, texts(8))
    Bun.spawnSync(["mkfifo", join(q.inbox, "fifo.json")])
    const io = new IoThread({
      dirs: { inbox: q.inbox, processing: q.processing, done: q.done, error: q.error },
      maxBytes: 1024,
    })
    cleanups.push(() => io.close())
    const names = [...Object.keys(texts(8)), "fifo.json", "gone.json"]
    const regular = Uint8Array.from(names, (n) => (n === "fifo.json" ? 0 : 1))
    const r = await io.claimIn(names, regular, names.length, 1 << 20)
    expect(r.coldStarted).toBe(8)
    const text = (i: number) =>
      new TextDecoder().decode(new Uint8Array(r.data, r.spans[2 * i] as number, r.spans[2 * i + 1] as number))
    expect(Array.from({ length: 8 }, (_, i) => text(i))).toEqual(Object.values(texts(8)))
    // The same files again, now in memory: nothing to read ahead.
    for (const name of Object.keys(texts(8))) fs.renameSync(join(q.processing, name), join(q.inbox, name))
    const again = await io.claimIn(Object.keys(texts(8)), new Uint8Array(8).fill(1), 8, 1 << 20)
    expect(again.coldStarted).toBe(0)
  })
})
