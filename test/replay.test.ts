// End to end: `bun scripts/replay.ts` and the built `packages/ops/dist/replay.sh`, as real
// processes, on a queue the real consume has drained. Every refusal is checked against a full
// snapshot of the queue and the ledger taken before it: nothing may change.
import { Database } from "bun:sqlite"
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { list, repoRoot, run, snapshot, spool, type TempDir, tempDir, tempQueue } from "./support.ts"

const replaySh = join(repoRoot, "packages/ops/dist/replay.sh")

/** A queue after consume on the sample: evt-broken-0001.json (parse) and evt-noorder-0002.json (missing-field) in error/. */
let template: TempDir
const BROKEN = "evt-broken-0001.json"
const NOORDER = "evt-noorder-0002.json"
const DONE = "evt-03bdf456.json"

beforeAll(async () => {
  const build = await run(["bun", join(repoRoot, "packages/ops/build.ts"), "--if-stale"])
  expect(build.exitCode).toBe(0)
  template = await tempDir("spool-replay-template-")
  const q = await tempQueue({ seed: "fixtures" })
  fs.cpSync(q.root, join(template.path, "q"), { recursive: true })
  await q[Symbol.asyncDispose]()
  const r = await spool("consume", ["--root", join(template.path, "q")])
  expect(r.exitCode).toBe(0)
  expect(list(join(template.path, "q", "error"))).toEqual([BROKEN, NOORDER])
  expect(list(join(template.path, "q", "done"))).toContain(DONE)
}, 120_000)

afterAll(async () => {
  await template?.[Symbol.asyncDispose]()
})

/** A fresh copy of the drained queue. */
async function drained(): Promise<TempDir & { root: string }> {
  const d = await tempDir()
  fs.cpSync(join(template.path, "q"), join(d.path, "q"), { recursive: true })
  return Object.assign(d, { root: join(d.path, "q") })
}

/** Everything replay could touch: support's snapshot plus replay bookkeeping and every entry of the root. */
function fullSnapshot(root: string) {
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    return {
      ...snapshot(root),
      failureRows: db.query("SELECT * FROM failures ORDER BY id").all(),
      replays: db.query("SELECT * FROM replays ORDER BY id").all(),
      rootEntries: list(root).filter((n) => !n.startsWith("ledger.db")),
      mtimes: ["inbox", "processing", "done", "error"].map((d) => fs.statSync(join(root, d)).mtimeMs),
    }
  } finally {
    db.close()
  }
}

const runners = [
  [
    "bun scripts/replay.ts",
    (args: string[], env?: Record<string, string>, cwd?: string) =>
      run(["bun", join(repoRoot, "scripts/replay.ts"), ...args], { ...(env ? { env } : {}), ...(cwd ? { cwd } : {}) }),
  ],
  [
    "dist/replay.sh",
    (args: string[], env?: Record<string, string>, cwd?: string) =>
      run([replaySh, ...args], { ...(env ? { env } : {}), ...(cwd ? { cwd } : {}) }),
  ],
] as const

describe.each(runners)("%s", (name, replay) => {
  it("moves error/FILE back to inbox/, marks its failure replayed, logs a replay and rewrites error.csv", async () => {
    await using q = await drained()
    const bytes = fs.readFileSync(join(q.root, "error", BROKEN))
    const r = await replay(["--root", q.root, BROKEN])
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain(`moved error/${BROKEN} back to inbox/${BROKEN}`)
    expect(r.exitCode).toBe(0)
    expect(list(join(q.root, "inbox"))).toEqual([BROKEN])
    expect(fs.readFileSync(join(q.root, "inbox", BROKEN))).toEqual(bytes)
    expect(list(join(q.root, "error"))).toEqual([NOORDER])
    const db = new Database(join(q.root, "ledger.db"), { readonly: true })
    try {
      const failures = db.query("SELECT id, file, reason, replayed_at FROM failures ORDER BY file").all() as {
        id: number
        file: string
        replayed_at: string | null
      }[]
      const broken = failures.find((f) => f.file === BROKEN)
      expect(broken?.replayed_at).toMatch(/^\d{4}-\d\d-\d\dT/)
      expect(failures.find((f) => f.file === NOORDER)?.replayed_at).toBeNull()
      expect(db.query("SELECT file, failure_id FROM replays").all()).toEqual([{ file: BROKEN, failure_id: broken?.id }])
    } finally {
      db.close()
    }
    expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe(`file,reason\n${NOORDER},missing-field\n`)
  })

  it("finds the root from SPOOL_ROOT, and the replayed file is consumed again", async () => {
    await using q = await drained()
    const r = await replay([NOORDER], { SPOOL_ROOT: q.root })
    expect(r.exitCode).toBe(0)
    expect(list(join(q.root, "inbox"))).toEqual([NOORDER])
    const again = await spool("consume", ["--root", q.root])
    expect(again.exitCode).toBe(0)
    expect(list(join(q.root, "inbox"))).toEqual([])
    expect(list(join(q.root, "error"))).toEqual([BROKEN, NOORDER])
  })

  it("uses ./spool when neither --root nor SPOOL_ROOT is given", async () => {
    await using d = await drained()
    fs.renameSync(d.root, join(d.path, "spool"))
    const r = await replay([BROKEN], { SPOOL_ROOT: "" }, d.path)
    expect(r.exitCode).toBe(0)
    expect(list(join(d.path, "spool", "inbox"))).toEqual([BROKEN])
  })

  /** Each case: what to set up in the queue, then the arguments; replay must refuse and change nothing. */
  const refusals: [string, (root: string, outside: string) => string[], number][] = [
    ["a name that is in no directory", () => ["nothing-here.json"], 1],
    ["a file of done/", () => [DONE], 1],
    ["a path into done/ through ..", () => [`../done/${DONE}`], 1],
    ["..", () => [".."], 1],
    [".", () => ["."], 1],
    ["an empty name", () => [""], 1],
    ["error/ prefixed to the name", () => [`error/${BROKEN}`], 1],
    ["an absolute path to the file in error/", (root) => [join(root, "error", BROKEN)], 1],
    [
      "an absolute path to a file outside the queue",
      (_root, outside) => {
        fs.writeFileSync(join(outside, "elsewhere.json"), "{}")
        return [join(outside, "elsewhere.json")]
      },
      1,
    ],
    [
      "a path through a symlinked directory in error/",
      (root, outside) => {
        fs.writeFileSync(join(outside, "x.json"), "{}")
        fs.symlinkSync(outside, join(root, "error", "sub"))
        return ["sub/x.json"]
      },
      1,
    ],
    [
      "a symlink in error/ pointing into done/",
      (root) => {
        fs.symlinkSync(join(root, "done", DONE), join(root, "error", "link.json"))
        return ["link.json"]
      },
      1,
    ],
    [
      "a symlink in error/ pointing outside the queue",
      (root, outside) => {
        fs.writeFileSync(join(outside, "secret.json"), "{}")
        fs.symlinkSync(join(outside, "secret.json"), join(root, "error", "secret.json"))
        return ["secret.json"]
      },
      1,
    ],
    [
      "a directory in error/",
      (root) => {
        fs.mkdirSync(join(root, "error", "dir.json"))
        return ["dir.json"]
      },
      1,
    ],
    [
      "a FIFO in error/ (never opened)",
      (root) => {
        expect(Bun.spawnSync(["mkfifo", join(root, "error", "fifo.json")]).exitCode).toBe(0)
        return ["fifo.json"]
      },
      1,
    ],
    [
      "a name that already exists in inbox/",
      (root) => {
        fs.writeFileSync(join(root, "inbox", BROKEN), '{"new":"producer data"}')
        return [BROKEN]
      },
      1,
    ],
    [
      "a name held by a dangling symlink in inbox/",
      (root) => {
        fs.symlinkSync("/nonexistent", join(root, "inbox", BROKEN))
        return [BROKEN]
      },
      1,
    ],
    [
      "a name a consumer is processing",
      (root) => {
        fs.writeFileSync(join(root, "processing", BROKEN), "{}")
        return [BROKEN]
      },
      1,
    ],
    ["no FILE", () => [], 2],
    ["two FILEs", () => [BROKEN, NOORDER], 2],
    ["an unknown option", () => ["--force", BROKEN], 2],
    [
      "a root that is not a queue",
      (root) => {
        fs.rmSync(join(root, "processing"), { recursive: true })
        return [BROKEN]
      },
      2,
    ],
  ]

  // The source entry loads @spool/core whole (arktype included, about a second per start on
  // this machine), so it gets a sample of the refusals; the built replay.sh gets all of them.
  const sample = new Set([
    "..",
    "a file of done/",
    "an absolute path to a file outside the queue",
    "a symlink in error/ pointing into done/",
    "a name that already exists in inbox/",
    "no FILE",
  ])
  const cases = name === "dist/replay.sh" ? refusals : refusals.filter(([c]) => sample.has(c))

  it.each(cases)("refuses %s and changes nothing", async (_case, setUp, code) => {
    await using q = await drained()
    await using outside = await tempDir("spool-outside-")
    const args = setUp(q.root, outside.path)
    const isQueue = fs.existsSync(join(q.root, "processing"))
    const before = isQueue ? fullSnapshot(q.root) : undefined
    const outsideBefore = list(outside.path).map((n) => [n, fs.lstatSync(join(outside.path, n)).mtimeMs])
    const r = await replay(["--root", q.root, ...args])
    expect(r.stdout).toBe("")
    expect(r.stderr).toMatch(/^replay: .+/)
    expect(r.exitCode).toBe(code)
    if (before) expect(fullSnapshot(q.root)).toEqual(before)
    else expect(list(join(q.root, "error"))).toEqual([BROKEN, NOORDER])
    expect(list(outside.path).map((n) => [n, fs.lstatSync(join(outside.path, n)).mtimeMs])).toEqual(outsideBefore)
  })

  it("refuses a second replay of the same file and changes nothing", async () => {
    await using q = await drained()
    expect((await replay(["--root", q.root, BROKEN])).exitCode).toBe(0)
    const before = fullSnapshot(q.root)
    const r = await replay(["--root", q.root, BROKEN])
    expect(r.stderr).toContain("in inbox/")
    expect(r.exitCode).toBe(1)
    expect(fullSnapshot(q.root)).toEqual(before)
  })

  it("prints usage with --help and exits 0", async () => {
    const r = await replay(["--help"])
    expect(r.stdout).toContain("Usage:")
    expect(r.stdout).toContain("--root")
    expect(r.exitCode).toBe(0)
  })
})
