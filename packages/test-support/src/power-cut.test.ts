// The power-cut file system's durability model, case by case: what a cut keeps is exactly what
// was fsynced, as native/power-cut-fs.c's header says.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { type CutMode, mountPowerCut, powerCutUnavailable } from "./power-cut.ts"
import { tempDir } from "./temp.ts"
import { missingTest } from "./tools.ts"

const fuseMissing = await powerCutUnavailable()
const fuseIt =
  fuseMissing === undefined ? it : missingTest(fuseMissing, "installs fuse3 and libfuse3-dev and offers /dev/fuse to")

const fsync = (path: string) => {
  const fd = fs.openSync(path, "r")
  try {
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/** Every file under `dir` with its content, and every directory as "dir/". */
function tree(dir: string, prefix = ""): Record<string, string> {
  const out: Record<string, string> = {}
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const p = `${prefix}${e.name}`
    if (e.isDirectory()) Object.assign(out, { [`${p}/`]: "" }, tree(join(dir, e.name), `${p}/`))
    else out[p] = fs.readFileSync(join(dir, e.name), "utf8")
  }
  return out
}

/** Sets up `backing` (durable from the start), runs `act` on the mount, cuts, and returns what is left. */
async function afterCut(
  setup: Record<string, string>,
  act: (root: string) => void,
  mode: CutMode = { kind: "all" },
): Promise<Record<string, string>> {
  await using t = await tempDir()
  const backing = join(t.path, "backing")
  for (const [p, content] of Object.entries({ "inbox/": "", "done/": "", ...setup })) {
    if (p.endsWith("/")) fs.mkdirSync(join(backing, p), { recursive: true })
    else fs.writeFileSync(join(backing, p), content)
  }
  const m = await mountPowerCut(backing, t.path)
  try {
    act(m.root)
    await m.cut(mode)
  } finally {
    await m.unmount()
  }
  return tree(backing)
}

describe("a power cut on the power-cut file system", () => {
  fuseIt("loses a rename between directories until both directories are fsynced, and undoes it whole", async () => {
    /** Moves inbox/a to done/, then fsyncs the directories named. */
    const moveThenSync = (dirs: string[]) => (root: string) => {
      fs.renameSync(join(root, "inbox/a"), join(root, "done/a"))
      for (const d of dirs) fsync(join(root, d))
    }
    const before = { "inbox/": "", "inbox/a": "A", "done/": "" }
    const after = { "inbox/": "", "done/": "", "done/a": "A" }
    expect(await afterCut({ "inbox/a": "A" }, moveThenSync([]))).toEqual(before)
    expect(await afterCut({ "inbox/a": "A" }, moveThenSync(["done"]))).toEqual(before)
    expect(await afterCut({ "inbox/a": "A" }, moveThenSync(["inbox"]))).toEqual(before)
    expect(await afterCut({ "inbox/a": "A" }, moveThenSync(["inbox", "done"]))).toEqual(after)
  })

  fuseIt("keeps a file's data only from its own fsync, and a new name only from its directory's", async () => {
    const write = (root: string, sync: { file?: boolean; dir?: boolean }) => {
      const fd = fs.openSync(join(root, "inbox/new"), "w")
      fs.writeSync(fd, "new")
      if (sync.file) fs.fsyncSync(fd)
      fs.closeSync(fd)
      if (sync.dir) fsync(join(root, "inbox"))
    }
    expect(await afterCut({}, (r) => write(r, { file: true }))).toEqual({ "inbox/": "", "done/": "" })
    expect(await afterCut({}, (r) => write(r, { dir: true }))).toEqual({ "inbox/": "", "inbox/new": "", "done/": "" })
    expect(await afterCut({}, (r) => write(r, { file: true, dir: true }))).toEqual({
      "inbox/": "",
      "inbox/new": "new",
      "done/": "",
    })
  })

  fuseIt("brings back a removed or replaced file, and the bytes an unsynced write overwrote", async () => {
    expect(
      await afterCut({ "inbox/a": "A", "inbox/b": "B", "done/c": "old" }, (r) => {
        fs.unlinkSync(join(r, "inbox/a"))
        fs.writeFileSync(join(r, "inbox/b"), "changed")
        fs.writeFileSync(join(r, "done/c.tmp"), "replacement")
        fs.renameSync(join(r, "done/c.tmp"), join(r, "done/c"))
        fs.appendFileSync(join(r, "done/c"), "+")
      }),
    ).toEqual({ "inbox/": "", "inbox/a": "A", "inbox/b": "B", "done/": "", "done/c": "old" })
  })

  fuseIt("keeps a seeded random part of the unsynced changes, each file's writes a prefix of them", async () => {
    const act = (r: string) => {
      for (let i = 0; i < 40; i++) fs.renameSync(join(r, `inbox/m${i}`), join(r, `done/m${i}`))
      const fd = fs.openSync(join(r, "log"), "a")
      for (let i = 0; i < 40; i++) fs.writeSync(fd, `${i},`)
      fs.closeSync(fd)
    }
    const setup = Object.fromEntries([["log", ""], ...Array.from({ length: 40 }, (_, i) => [`inbox/m${i}`, `${i}`])])
    const a = await afterCut(setup, act, { kind: "subset", seed: 7 })
    const b = await afterCut(setup, act, { kind: "subset", seed: 7 })
    expect(a).toEqual(b)
    const done = Object.keys(a).filter((p) => /^done\/m/.test(p)).length
    const inbox = Object.keys(a).filter((p) => /^inbox\/m/.test(p)).length
    expect(done + inbox).toBe(40)
    expect(done).toBeGreaterThan(0)
    expect(inbox).toBeGreaterThan(0)
    const log = a.log ?? ""
    expect(Array.from({ length: 40 }, (_, i) => `${i},`).join("")).toStartWith(log)
  })
})
