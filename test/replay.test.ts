// End to end: `bun scripts/replay.ts`, the built `packages/ops/dist/replay.sh` and `spool
// replay`, as real processes, on a queue the real consume has drained, on both ledgers from one
// matrix. Every refusal and skip is checked against a full snapshot of the queue and the ledger
// taken before it: nothing may change.
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { dirname, join } from "node:path"
import {
  type BackendQueue,
  ledgerBackends,
  list,
  parseCsv,
  type QueueTemplate,
  repoRoot,
  run,
  spool,
  tempDir,
  templateOf,
  tempQueue,
} from "@spool/test-support"

const replaySh = join(repoRoot, "packages/ops/dist/replay.sh")
const lagSh = join(repoRoot, "packages/ops/dist/lag.sh")

/** The sample queue after consume: evt-broken-0001.json (parse) and evt-noorder-0002.json (missing-field) in error/. */
const BROKEN = "evt-broken-0001.json"
const NOORDER = "evt-noorder-0002.json"
const DONE = "evt-03bdf456.json"
/** DONE's message delivered again under this name after its key was pruned: beyond-horizon, a business error. */
const AGAIN = "evt-again.json"
/** msg_ids of the sample: NOORDER's (it parses), DONE's (processed), one that no message has. */
const NOORDER_ID = "m-x-02"
const DONE_ID = "m-1002-01"
const day = 86_400_000

beforeAll(async () => {
  const build = await run(["bun", join(repoRoot, "packages/ops/build.ts"), "--if-stale"])
  expect(build.exitCode).toBe(0)
}, 120_000)

/** Everything replay could touch: the end state plus replay bookkeeping and every entry of the root. */
async function fullSnapshot(q: BackendQueue) {
  return {
    ...(await q.snapshot()),
    failureRows: await q.rows("SELECT * FROM failures ORDER BY id"),
    replays: await q.rows("SELECT * FROM replays ORDER BY id"),
    rootEntries: list(q.root).filter((n) => !n.startsWith("ledger.db")),
    mtimes: ["inbox", "processing", "done", "error"].map((d) => fs.statSync(join(q.root, d)).mtimeMs),
  }
}

/** `bun spool replay`: the same command under the one entry point. */
const spoolReplay = (args: readonly string[], env?: Record<string, string>, cwd?: string) =>
  run(["bun", join(repoRoot, "packages/spool/bin/spool.ts"), "replay", ...args], {
    ...(env ? { env } : {}),
    ...(cwd ? { cwd } : {}),
  })

const runners = [
  [
    "bun scripts/replay.ts",
    (args: readonly string[], env?: Record<string, string>, cwd?: string) =>
      run(["bun", join(repoRoot, "scripts/replay.ts"), ...args], { ...(env ? { env } : {}), ...(cwd ? { cwd } : {}) }),
  ],
  [
    "dist/replay.sh",
    (args: readonly string[], env?: Record<string, string>, cwd?: string) =>
      run([replaySh, ...args], { ...(env ? { env } : {}), ...(cwd ? { cwd } : {}) }),
  ],
] as const

/** Every entry point of replay: the lab's contract holds through each alike. */
const entryPoints = [...runners, ["bun spool replay", spoolReplay] as const] as const

/** The stderr lines that mention a skip. */
const skipLines = (stderr: string) => stderr.split("\n").filter((l) => l.includes("skip"))

/** What replay prints to stderr after moving `name`, a format error unchanged since it failed with `reason`. */
const unchangedWarning = (name: string, reason: string) =>
  `replay: warning: ${name}: it failed with ${reason}, a format error, and its bytes are the ones that failed, ` +
  "so it will fail the same way; fix it at the source, or correct it in error/ before replaying it\n"

/** The tail of the line that sums up a selection's skips. */
const skipAdvice =
  "fix them at the source, or correct them in error/ first; --include-unchanged replays them as they are"

// Bulk replay: several names, --match, --reason, --all, --dry-run, --max-replays and --force.
// Each file moves or is refused on its own; stdout lists the names moved (or that would move).

/** Failed messages with names a glob or a shell could trip over, consumed into error/ beside the sample's two. */
const HOSTILE = {
  space: "evt x 1.json",
  comma: "evt,2.json",
  brackets: "evt-[3].json",
  star: "evt-*4.json",
}
const OTHER = "zz-other.json"
/** The HOSTILE names as text output prints them (quoted for a shell, as GNU ls --quoting-style=shell-escape). */
const shown: Record<string, string> = {
  [HOSTILE.space]: "'evt x 1.json'",
  [HOSTILE.comma]: "evt,2.json",
  [HOSTILE.brackets]: "'evt-[3].json'",
  [HOSTILE.star]: "'evt-*4.json'",
}
const show = (name: string) => shown[name] ?? name

/**
 * Edits every regular file in error/ as an operator's fix would, appending a newline: its bytes
 * differ from the ones that failed (so replay does not refuse a format error's file as
 * unchanged), and consumed again it fails the same way.
 */
function correct(q: BackendQueue): BackendQueue {
  const error = join(q.root, "error")
  for (const n of list(error)) if (fs.lstatSync(join(error, n)).isFile()) fs.appendFileSync(join(error, n), "\n")
  return q
}

async function replayRows(q: BackendQueue): Promise<{ file: string; failure_id: unknown }[]> {
  return (await q.rows("SELECT file, failure_id FROM replays ORDER BY id")) as { file: string; failure_id: unknown }[]
}

/** Logs `n` earlier replays of `file` in the ledger, as n replay-and-fail rounds would have. */
async function logReplays(q: BackendQueue, file: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++)
    await q.insert("replays", { file, failure_id: null, replayed_at: "2026-01-01T00:00:00.000Z" })
}

for (const backend of await ledgerBackends())
  (backend.skip ? describe.skip : describe)(`replay on ${backend.name}`, () => {
    /** The drained sample, copied for each test. */
    let template: QueueTemplate
    beforeAll(async () => {
      const q = await backend.queue({ seed: "fixtures" })
      template = templateOf(q)
      const r = await q.command("consume")
      expect(r.exitCode).toBe(0)
      expect(list(join(q.root, "error"))).toEqual([BROKEN, NOORDER])
      expect(list(join(q.root, "done"))).toContain(DONE)
    }, 120_000)
    afterAll(() => template?.[Symbol.asyncDispose]())

    /** A fresh copy of the drained queue and its ledger, as consume left it: error/ holds the bytes that failed. */
    const unchanged = () => template.copy()
    /** `unchanged`, each file in error/ then corrected (see `correct`), so replay moves it. */
    const drained = async () => correct(await template.copy())

    /** A drained copy of the sample queue whose error/ also holds the HOSTILE files and OTHER (all parse failures). */
    async function drainedHostile(): Promise<BackendQueue> {
      const q = await drained()
      for (const n of [...Object.values(HOSTILE), OTHER]) fs.writeFileSync(join(q.root, "inbox", n), "{not json")
      const r = await q.command("consume")
      expect(r.exitCode).toBe(0)
      expect(list(join(q.root, "error"))).toEqual([...Object.values(HOSTILE), BROKEN, NOORDER, OTHER].sort())
      return correct(q)
    }

    describe.each(entryPoints)("%s", (name, replay) => {
      it("moves error/FILE back to inbox/, marks its failure replayed, logs a replay and rewrites error.csv", async () => {
        await using q = await drained()
        const bytes = fs.readFileSync(join(q.root, "error", BROKEN))
        // Named bare, or as error/NAME as delete takes it: the same file.
        const r = await replay([...q.args, name === "bun spool replay" ? `error/${BROKEN}` : BROKEN])
        expect(r.stdout).toBe("")
        expect(r.stderr).toContain(`moved error/${BROKEN} back to inbox/${BROKEN}`)
        expect(r.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([BROKEN])
        expect(fs.readFileSync(join(q.root, "inbox", BROKEN))).toEqual(bytes)
        expect(list(join(q.root, "error"))).toEqual([NOORDER])
        const failures = (await q.rows("SELECT id, file, reason, replayed_at FROM failures")) as {
          id: unknown
          file: string
          replayed_at: string | null
        }[]
        const broken = failures.find((f) => f.file === BROKEN)
        expect(broken?.replayed_at).toMatch(/^\d{4}-\d\d-\d\dT/)
        expect(failures.find((f) => f.file === NOORDER)?.replayed_at).toBeNull()
        expect(await q.rows("SELECT file, failure_id FROM replays")).toEqual([{ file: BROKEN, failure_id: broken?.id }])
        expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe(`file,reason\n${NOORDER},missing-field\n`)
      })

      it("finds the root from SPOOL_ROOT, and the replayed file is consumed again", async () => {
        await using q = await drained()
        const r = await replay([NOORDER], { ...q.env, SPOOL_ROOT: q.root })
        expect(r.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([NOORDER])
        const again = await q.command("consume")
        expect(again.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([])
        expect(list(join(q.root, "error"))).toEqual([BROKEN, NOORDER])
      })

      it("uses ./spool when neither --root nor SPOOL_ROOT is given", async () => {
        await using q = await drained()
        const parent = dirname(q.root)
        fs.renameSync(q.root, join(parent, "spool"))
        const r = await replay([BROKEN], { ...q.env, SPOOL_ROOT: "" }, parent)
        expect(r.exitCode).toBe(0)
        expect(list(join(parent, "spool", "inbox"))).toEqual([BROKEN])
      })

      /** Each case: what to set up in the queue, then the arguments; replay must refuse and change nothing. */
      const refusals: [string, (root: string, outside: string) => string[], number][] = [
        ["a name that is in no directory", () => ["nothing-here.json"], 1],
        ["a file of done/", () => [DONE], 1],
        ["a path into done/ through ..", () => [`../done/${DONE}`], 1],
        ["..", () => [".."], 1],
        [".", () => ["."], 1],
        ["an empty name", () => [""], 1],
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
        ["an unknown option", () => ["--bogus", BROKEN], 2],
        [
          "a root that is not a queue",
          (root) => {
            fs.rmSync(join(root, "processing"), { recursive: true })
            return [BROKEN]
          },
          2,
        ],
      ]

      // The source entries load @spool/core whole (arktype included, about a second per start on
      // this machine), so they get a sample of the refusals, one of each kind the contract keeps;
      // the built replay.sh gets all of them.
      const sample = new Set([
        "..",
        "a file of done/",
        "an absolute path to a file outside the queue",
        "a symlink in error/ pointing into done/",
        "a directory in error/",
        "a name that already exists in inbox/",
        "a name a consumer is processing",
        "no FILE",
      ])
      const cases = name === "dist/replay.sh" ? refusals : refusals.filter(([c]) => sample.has(c))

      // On the bytes that failed, so that nothing but the refusal itself can keep a file in error/.
      it.each(cases)("refuses %s and changes nothing", async (_case, setUp, code) => {
        await using q = await unchanged()
        await using outside = await tempDir("spool-outside-")
        const args = setUp(q.root, outside.path)
        const isQueue = fs.existsSync(join(q.root, "processing"))
        const before = isQueue ? await fullSnapshot(q) : undefined
        const outsideBefore = list(outside.path).map((n) => [n, fs.lstatSync(join(outside.path, n)).mtimeMs])
        const r = await replay([...q.args, ...args])
        expect(r.stdout).toBe("")
        expect(r.stderr).toMatch(/^replay: .+/)
        expect(r.exitCode).toBe(code)
        if (before) expect(await fullSnapshot(q)).toEqual(before)
        else expect(list(join(q.root, "error"))).toEqual([BROKEN, NOORDER])
        expect(list(outside.path).map((n) => [n, fs.lstatSync(join(outside.path, n)).mtimeMs])).toEqual(outsideBefore)
      })

      it("takes names starting with = + - @ from error.csv, whose cells are exact, and replays each", async () => {
        await using q = await drained()
        const formulas = ["+SUM(1).json", "-2+3.json", "=cmd|' -C calc'!A0.json", "@x.json"]
        for (const n of formulas) fs.writeFileSync(join(q.root, "inbox", n), "{not json")
        expect((await q.command("consume")).exitCode).toBe(0)
        correct(q)
        const csv = fs.readFileSync(join(q.root, "error.csv"), "utf8")
        expect(csv).toBe(
          "file,reason\n+SUM(1).json,parse\n-2+3.json,parse\n=cmd|' -C calc'!A0.json,parse\n@x.json,parse\n" +
            `${BROKEN},parse\n${NOORDER},missing-field\n`,
        )
        const [header, ...rows] = parseCsv(csv)
        expect(header).toEqual(["file", "reason"])
        const names = rows.map((r) => r[0] as string).filter((n) => !n.startsWith("evt-"))
        expect(names).toEqual(formulas)
        for (const n of names) {
          const r = await replay([...q.args, "--", n])
          expect(r.exitCode).toBe(0)
          expect(fs.readFileSync(join(q.root, "inbox", n), "utf8")).toBe("{not json\n")
        }
        expect(list(join(q.root, "error"))).toEqual([BROKEN, NOORDER])
        expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe(
          `file,reason\n${BROKEN},parse\n${NOORDER},missing-field\n`,
        )
      })

      it("refuses a second replay of the same file and changes nothing", async () => {
        await using q = await drained()
        expect((await replay([...q.args, BROKEN])).exitCode).toBe(0)
        const before = await fullSnapshot(q)
        const r = await replay([...q.args, BROKEN])
        expect(r.stderr).toContain("in inbox/")
        expect(r.exitCode).toBe(1)
        expect(await fullSnapshot(q)).toEqual(before)
      })

      it("prints usage with --help, saying the contract, and exits 0", async () => {
        const r = await replay(["--help"])
        const help = r.stdout.replace(/\s+/g, " ")
        expect(help).toContain("Usage:")
        expect(help).toContain("--root")
        expect(help).toContain("Every named FILE that is a regular file in error/ moves.")
        expect(help).toContain(
          "refused, changing nothing, only when it is another path, is not a regular file in error/, or its name is taken in inbox/ or processing/",
        )
        expect(help).toContain("A FILE that will fail the same way moves too, with a warning")
        expect(help).toContain("skips the files that would fail the same way and says how many and why in one line")
        expect(help).toMatch(/--include-unchanged +a selection takes the files that would fail the same way too/)
        expect(help).toMatch(/--force +the same as --include-unchanged/)
        expect(r.exitCode).toBe(0)
      })
    })

    describe.each(runners)("%s, bulk", (name, replay) => {
      const isBuilt = name === "dist/replay.sh"

      it("replays several named files, lists them on stdout, rewrites error.csv once, and consume takes them again", async () => {
        await using q = await drained()
        const r = await replay([...q.args, NOORDER, BROKEN])
        expect(r.stdout).toBe(`${BROKEN}\n${NOORDER}\n`)
        expect(r.stderr).toContain(
          `moved error/${BROKEN} back to inbox/${BROKEN} (failed with parse; record marked replayed)`,
        )
        expect(r.stderr).toContain("moved 2 of 2 selected files back to inbox/, refused 0")
        expect(r.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([BROKEN, NOORDER])
        expect(list(join(q.root, "error"))).toEqual([])
        expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe("file,reason\n")
        expect((await replayRows(q)).map((x) => x.file)).toEqual([BROKEN, NOORDER])
        expect((await replayRows(q)).every((x) => x.failure_id !== null)).toBe(true)
        const again = await q.command("consume")
        expect(again.stderr).toContain("files=2 ")
        expect(again.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([])
        expect(list(join(q.root, "error"))).toEqual([BROKEN, NOORDER])
        expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe(
          `file,reason\n${BROKEN},parse\n${NOORDER},missing-field\n`,
        )
      })

      it("skips a file whose name is taken in inbox/, moves the others, and exits 1", async () => {
        await using q = await drained()
        const broken = fs.readFileSync(join(q.root, "error", BROKEN), "utf8")
        fs.writeFileSync(join(q.root, "inbox", BROKEN), '{"new":"producer data"}')
        const r = await replay([...q.args, "--all"])
        expect(r.stdout).toBe(`${NOORDER}\n`)
        expect(r.stderr).toContain(`refused ${BROKEN}: inbox/ already holds a file of that name`)
        expect(r.stderr).toContain("moved 1 of 2 selected files back to inbox/, refused 1")
        expect(r.exitCode).toBe(1)
        expect(fs.readFileSync(join(q.root, "inbox", BROKEN), "utf8")).toBe('{"new":"producer data"}')
        expect(fs.readFileSync(join(q.root, "error", BROKEN), "utf8")).toBe(broken)
        expect(list(join(q.root, "inbox"))).toEqual([BROKEN, NOORDER])
        expect((await replayRows(q)).map((x) => x.file)).toEqual([NOORDER])
        expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe(`file,reason\n${BROKEN},parse\n`)
      })

      it("selects by --reason from the ledger: only the missing-field failure moves", async () => {
        await using q = await drained()
        const r = await replay([...q.args, "--reason", "missing-field"])
        expect(r.stdout).toBe(`${NOORDER}\n`)
        expect(r.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([NOORDER])
        expect(list(join(q.root, "error"))).toEqual([BROKEN])
      })

      it("skips under --all a file replayed --max-replays times already (default 3); a named one moves with a warning", async () => {
        await using q = await drained()
        await logReplays(q, NOORDER, 3)
        const skipped = await replay([...q.args, "--all"])
        expect(skipped.stdout).toBe(`${BROKEN}\n`)
        expect(skipLines(skipped.stderr)).toEqual([
          "replay: skipped 1 of 2 selected files, which would fail the same way (1 already replayed --max-replays 3 " +
            `times): ${skipAdvice}`,
        ])
        expect(skipped.stderr).not.toContain("replay: refused ")
        expect(skipped.exitCode).toBe(0)
        expect(list(join(q.root, "error"))).toEqual([NOORDER])
        const raised = await replay([...q.args, "--max-replays", "4", "--all"])
        expect(raised.stdout).toBe(`${NOORDER}\n`)
        expect(raised.stderr).not.toContain("warning")
        expect(raised.exitCode).toBe(0)
        // Consumed again, it fails again: now four replays are logged.
        expect((await q.command("consume")).exitCode).toBe(0)
        expect(list(join(q.root, "error"))).toEqual([BROKEN, NOORDER])
        const named = await replay([...q.args, "--max-replays", "4", NOORDER])
        expect(named.stdout).toBe(`${NOORDER}\n`)
        expect(named.stderr).toContain(
          `replay: warning: ${NOORDER}: it was already replayed 4 times (--max-replays 4), so it will likely fail the same way`,
        )
        expect(named.exitCode).toBe(0)
        expect((await replayRows(q)).filter((x) => x.file === NOORDER)).toHaveLength(5)
      })

      it("matches a glob against names with spaces, commas, brackets and *, and consume takes them again", async () => {
        await using q = await drainedHostile()
        const r = await replay([...q.args, "--match", "evt*"])
        const expected = [...Object.values(HOSTILE), BROKEN, NOORDER].sort()
        expect(r.stdout).toBe(expected.map((n) => `${show(n)}\n`).join(""))
        expect(r.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual(expected)
        expect(list(join(q.root, "error"))).toEqual([OTHER])
        expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe(`file,reason\n${OTHER},parse\n`)
        expect((await q.command("consume")).exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([])
        expect(list(join(q.root, "error"))).toEqual([...expected, OTHER].sort())
      })

      it("prints a name holding a newline or a backslash quoted for a shell, so each file stays one line", async () => {
        await using q = await drained()
        const backslash = "evt-back\\slash.json"
        const newline = "evt-x.json\nevt-forged.json"
        for (const n of [backslash, newline]) fs.writeFileSync(join(q.root, "inbox", n), "{not json")
        expect((await q.command("consume")).exitCode).toBe(0)
        correct(q)
        const r = await replay([...q.args, "--all"])
        expect(r.stdout).toBe(`'evt-back\\slash.json'\n${BROKEN}\n${NOORDER}\n'evt-x.json'$'\\n''evt-forged.json'\n`)
        expect(r.stderr).toContain(
          "replay: moved 'error/evt-x.json'$'\\n''evt-forged.json' back to 'inbox/evt-x.json'$'\\n''evt-forged.json' (failed with parse",
        )
        for (const line of r.stderr.trimEnd().split("\n")) expect(line).toStartWith("replay: ")
        expect(r.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([backslash, BROKEN, NOORDER, newline])
      })

      it("takes an escaped * and [ ] literally, and several globs as their union", async () => {
        await using q = await drainedHostile()
        const r = await replay([...q.args, "--match", "evt-\\*4.json", "--match", "evt-\\[3\\].json"])
        expect(r.stdout).toBe(`${show(HOSTILE.star)}\n${show(HOSTILE.brackets)}\n`)
        expect(r.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([HOSTILE.brackets, HOSTILE.star].sort())
      })

      it("lists with --dry-run what would move, be refused and be skipped, and changes nothing", async () => {
        await using q = await drainedHostile()
        fs.writeFileSync(join(q.root, "inbox", HOSTILE.comma), "producer's")
        await logReplays(q, OTHER, 3)
        const before = await fullSnapshot(q)
        const csvTime = fs.statSync(join(q.root, "error.csv")).mtimeMs
        const r = await replay([...q.args, "--dry-run", "--all"])
        const movable = [HOSTILE.space, HOSTILE.brackets, HOSTILE.star, BROKEN, NOORDER].sort()
        expect(r.stdout).toBe(movable.map((n) => `${show(n)}\n`).join(""))
        expect(r.stderr).toContain(`refused ${HOSTILE.comma}: inbox/ already holds`)
        expect(skipLines(r.stderr)).toEqual([
          "replay: dry run: would skip 1 of 7 selected files, which would fail the same way (1 already replayed " +
            `--max-replays 3 times): ${skipAdvice}`,
        ])
        expect(r.stderr).toContain("dry run: 5 of 7 selected files would move back to inbox/, 1 would be refused")
        // The refusal, not the skip, makes it exit 1.
        expect(r.exitCode).toBe(1)
        expect(await fullSnapshot(q)).toEqual(before)
        expect(fs.statSync(join(q.root, "error.csv")).mtimeMs).toBe(csvTime)
      })

      it("reports links, directories and FIFOs in error/ as refused under --all, never moving them", async () => {
        await using q = await drained()
        await using outside = await tempDir("spool-outside-")
        fs.writeFileSync(join(outside.path, "secret.json"), "{}")
        fs.symlinkSync(join(outside.path, "secret.json"), join(q.root, "error", "link.json"))
        fs.mkdirSync(join(q.root, "error", "dir.json"))
        fs.writeFileSync(join(q.root, "error", "dir.json", "inner.json"), "{}")
        expect(Bun.spawnSync(["mkfifo", join(q.root, "error", "fifo.json")]).exitCode).toBe(0)
        const r = await replay([...q.args, "--all"])
        expect(r.stdout).toBe(`${BROKEN}\n${NOORDER}\n`)
        for (const n of ["dir.json", "fifo.json", "link.json"]) expect(r.stderr).toContain(`refused ${n}: error/ holds`)
        expect(r.exitCode).toBe(1)
        expect(list(join(q.root, "error"))).toEqual(["dir.json", "fifo.json", "link.json"])
        expect(list(join(q.root, "error", "dir.json"))).toEqual(["inner.json"])
        expect(list(join(q.root, "inbox"))).toEqual([BROKEN, NOORDER])
        expect(list(outside.path)).toEqual(["secret.json"])
      })

      it("answers a dry run and a selection by reason as the real run would, creating no ledger, where error/ holds files no ledger recorded", async () => {
        await using q = await backend.queue()
        fs.writeFileSync(join(q.root, "error", BROKEN), "{not json")
        const before = list(q.root)
        if (backend.name === "SQLite") {
          // A new SQLite ledger beside files in error/ is refused: by the real run, so by these too.
          for (const args of [["--dry-run", "--all"], ["--reason", "parse"], ["--all"]]) {
            const r = await replay([...q.args, ...args])
            expect(r.stdout).toBe("")
            expect([args, r.stderr.match(/refusing to start a new ledger/g)?.length]).toEqual([args, 1])
            expect([args, r.exitCode]).toEqual([args, 2])
          }
        } else {
          const dry = await replay([...q.args, "--dry-run", "--all"])
          expect(dry.stdout).toBe(`${BROKEN}\n`)
          expect(dry.stderr).toContain("dry run: 1 of 1 selected file would move back to inbox/, 0 would be refused")
          expect(dry.exitCode).toBe(0)
          const byReason = await replay([...q.args, "--reason", "parse"])
          expect(byReason.stderr).toBe("replay: --reason parse selects no file in error/; nothing was changed\n")
          expect(byReason.exitCode).toBe(0)
          expect(await q.tables()).toEqual([])
        }
        expect(list(q.root)).toEqual(before)
        expect(list(join(q.root, "error"))).toEqual([BROKEN])
      })

      it("exits 0 and changes nothing when a selection finds no file", async () => {
        await using q = await drained()
        const before = await fullSnapshot(q)
        const r = await replay([...q.args, "--match", "nothing-*"])
        expect(r.stdout).toBe("")
        expect(r.stderr).toBe("replay: --match 'nothing-*' selects no file in error/; nothing was changed\n")
        expect(r.exitCode).toBe(0)
        expect(await fullSnapshot(q)).toEqual(before)
      })

      const usageErrors: [string, string[]][] = [
        ["names and --all together", [BROKEN, "--all"]],
        ["--match and --reason together", ["--match", "evt-*", "--reason", "parse"]],
        ["a glob with a path", ["--match", "../done/*"]],
        ["a negative --max-replays", ["--max-replays", "-1", "--all"]],
        ["a --max-replays that is not a number", ["--max-replays", "three", "--all"]],
        ["options without a selection", ["--dry-run"]],
        ["an unknown --reason, as an unknown --class is", ["--reason", "pars"]],
        ["an unknown --class", ["--class", "foo"]],
      ]
      it("names the reasons for an unknown --reason and suggests the nearest", async () => {
        await using q = await drained()
        const r = await replay([...q.args, "--reason", "pars"])
        expect(r.stderr).toStartWith("replay: --reason takes one of parse, missing-field, invalid-field, ")
        expect(r.stderr).toContain('not "pars" (did you mean parse?)')
        expect(r.exitCode).toBe(2)
      })

      it.each(isBuilt ? usageErrors : usageErrors.slice(0, 1))(
        "refuses %s as a usage error (exit 2) and changes nothing",
        async (_case, args) => {
          await using q = await drained()
          const before = await fullSnapshot(q)
          const r = await replay([...q.args, ...args])
          expect(r.stdout).toBe("")
          expect(r.stderr).toMatch(/^replay: .+/)
          expect(r.exitCode).toBe(2)
          expect(await fullSnapshot(q)).toEqual(before)
        },
      )
    })

    // The lab's contract: a named file in error/ moves, with a warning when it will fail the same
    // way; a selection (--match, --reason, --class, --id, --all) skips such files in one line and
    // exits 0, --include-unchanged (or --force) takes them; --class, --id; the replayed file's age.
    describe.each(entryPoints)("%s, the lab's contract", (_name, replay) => {
      /** The drained sample plus AGAIN (beyond-horizon) in error/, as consume and compact leave them. */
      let business: QueueTemplate
      beforeAll(async () => {
        const q = await template.copy()
        business = templateOf(q)
        const bytes = fs.readFileSync(join(q.root, "done", DONE))
        await q.exec("UPDATE processed SET processed_at = ? WHERE msg_id = ?", [
          new Date(Date.now() - 400 * day).toISOString(),
          DONE_ID,
        ])
        expect((await q.command("compact", ["--older-than", "30d", "--horizon", "365d"])).exitCode).toBe(0)
        q.put(AGAIN, bytes)
        expect((await q.command("consume")).exitCode).toBe(0)
        expect(list(join(q.root, "error"))).toEqual([BROKEN, NOORDER, AGAIN].sort())
        const reasons = await q.rows("SELECT file, reason FROM failures WHERE replayed_at IS NULL ORDER BY file")
        expect(reasons).toEqual([
          { file: AGAIN, reason: "beyond-horizon" },
          { file: BROKEN, reason: "parse" },
          { file: NOORDER, reason: "missing-field" },
        ])
      }, 120_000)
      afterAll(() => business?.[Symbol.asyncDispose]())

      it("moves the named evt-broken-0001.json, unchanged since it failed, back to inbox/ with a warning", async () => {
        await using q = await unchanged()
        const bytes = fs.readFileSync(join(q.root, "error", BROKEN))
        const r = await replay([...q.args, BROKEN])
        expect(r.stdout).toBe("")
        expect(r.stderr).toBe(
          `replay: moved error/${BROKEN} back to inbox/${BROKEN} (failed with parse; record marked replayed); ` +
            `run consume to process it\n${unchangedWarning(BROKEN, "parse")}`,
        )
        expect(r.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([BROKEN])
        expect(fs.readFileSync(join(q.root, "inbox", BROKEN))).toEqual(bytes)
        expect(list(join(q.root, "error"))).toEqual([NOORDER])
        const marked = await q.rows("SELECT file FROM failures WHERE replayed_at IS NOT NULL")
        expect(marked).toEqual([{ file: BROKEN }])
        expect((await replayRows(q)).map((x) => x.file)).toEqual([BROKEN])
        expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe(`file,reason\n${NOORDER},missing-field\n`)
        // Consumed again, the same bytes fail the same way, as the warning said.
        expect((await q.command("consume")).exitCode).toBe(0)
        expect(list(join(q.root, "error"))).toEqual([BROKEN, NOORDER])
      })

      it("moves every named file that is a regular file in error/, each unchanged one with its warning", async () => {
        await using q = await business.copy()
        const r = await replay([...q.args, NOORDER, BROKEN, AGAIN])
        expect(r.stdout).toBe(`${AGAIN}\n${BROKEN}\n${NOORDER}\n`)
        expect(r.stderr).toContain(unchangedWarning(BROKEN, "parse"))
        expect(r.stderr).toContain(unchangedWarning(NOORDER, "missing-field"))
        expect(r.stderr).not.toContain(`warning: ${AGAIN}`)
        expect(r.stderr).toContain("moved 3 of 3 selected files back to inbox/, refused 0; run consume")
        expect(skipLines(r.stderr)).toEqual([])
        expect(r.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([BROKEN, AGAIN, NOORDER].sort())
        expect(list(join(q.root, "error"))).toEqual([])
        expect((await replayRows(q)).map((x) => x.file)).toEqual([AGAIN, BROKEN, NOORDER])
      })

      it("moves a named file past --max-replays with a warning, and counts its replay", async () => {
        await using q = await business.copy()
        await logReplays(q, AGAIN, 3)
        const r = await replay([...q.args, AGAIN])
        expect(r.stdout).toBe("")
        expect(r.stderr).toContain(`replay: moved error/${AGAIN} back to inbox/${AGAIN} (failed with beyond-horizon`)
        expect(r.stderr).toContain(
          `replay: warning: ${AGAIN}: it was already replayed 3 times (--max-replays 3), so it will likely fail the ` +
            "same way; fix it at the source, or correct it in error/ before replaying it\n",
        )
        expect(r.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([AGAIN])
        const rows = (await replayRows(q)).filter((x) => x.file === AGAIN)
        expect(rows).toHaveLength(4)
        expect(rows.filter((x) => x.failure_id !== null)).toHaveLength(1)
      })

      it("still refuses, changing nothing and exiting 1, a named file that is not in error/, and moves the others", async () => {
        await using q = await unchanged()
        const r = await replay([...q.args, "nothing-here.json", BROKEN])
        expect(r.stdout).toBe(`${BROKEN}\n`)
        expect(r.stderr).toContain("replay: refused nothing-here.json: there is no such file in")
        expect(r.stderr).toContain(unchangedWarning(BROKEN, "parse"))
        expect(r.exitCode).toBe(1)
        expect(list(join(q.root, "inbox"))).toEqual([BROKEN])
      })

      /** Each selection of the business queue: what it moves, then its one skip line's start. */
      const selections: [string, string[], string[], string][] = [
        ["--all", ["--all"], [AGAIN], "skipped 2 of 3 selected files, which would fail the same way (2 format errors"],
        [
          "--match",
          ["--match", "evt-*"],
          [AGAIN],
          "skipped 2 of 3 selected files, which would fail the same way (2 format errors",
        ],
        [
          "--reason",
          ["--reason", "parse"],
          [],
          "skipped 1 of 1 selected file, which would fail the same way (1 format error",
        ],
        [
          "--class",
          ["--class", "format"],
          [],
          "skipped 2 of 2 selected files, which would fail the same way (2 format errors",
        ],
        [
          "--id",
          ["--id", NOORDER_ID],
          [],
          "skipped 1 of 1 selected file, which would fail the same way (1 format error",
        ],
      ]

      it.each(selections)(
        "skips under %s each unchanged format error, says so in one line, and exits 0",
        async (_case, args, moves, skipLine) => {
          await using q = await business.copy()
          const before = await fullSnapshot(q)
          const r = await replay([...q.args, ...args])
          expect(r.stdout).toBe(moves.map((n) => `${n}\n`).join(""))
          const lines = skipLines(r.stderr)
          expect(lines).toHaveLength(1)
          expect(lines[0]).toStartWith(`replay: ${skipLine}`)
          expect(lines[0]).toEndWith(skipAdvice)
          expect(r.stderr).not.toContain("replay: refused ")
          expect(r.stderr).not.toContain("warning")
          expect(r.exitCode).toBe(0)
          expect(list(join(q.root, "inbox"))).toEqual(moves)
          expect(list(join(q.root, "error"))).toEqual([BROKEN, NOORDER, AGAIN].filter((n) => !moves.includes(n)).sort())
          expect((await replayRows(q)).map((x) => x.file)).toEqual(moves)
          if (moves.length === 0) expect(await fullSnapshot(q)).toEqual(before)
        },
      )

      it.each(["--include-unchanged", "--force"])(
        "takes the unchanged format errors too with %s, each with its warning",
        async (flag) => {
          await using q = await business.copy()
          const r = await replay([...q.args, "--all", flag])
          expect(r.stdout).toBe(`${AGAIN}\n${BROKEN}\n${NOORDER}\n`)
          expect(r.stderr).toContain(unchangedWarning(BROKEN, "parse"))
          expect(r.stderr).toContain(unchangedWarning(NOORDER, "missing-field"))
          expect(skipLines(r.stderr)).toEqual([])
          expect(r.exitCode).toBe(0)
          expect(list(join(q.root, "error"))).toEqual([])
          expect((await replayRows(q)).map((x) => x.file)).toEqual([AGAIN, BROKEN, NOORDER])
        },
      )

      it("shows with --dry-run the same split, and changes nothing", async () => {
        await using q = await business.copy()
        await logReplays(q, AGAIN, 3)
        const before = await fullSnapshot(q)
        const selection = await replay([...q.args, "--all", "--dry-run"])
        expect(selection.stdout).toBe("")
        expect(skipLines(selection.stderr)).toEqual([
          "replay: dry run: would skip 3 of 3 selected files, which would fail the same way (2 format errors " +
            `unchanged since failing, 1 already replayed --max-replays 3 times): ${skipAdvice}`,
        ])
        expect(selection.stderr).toContain(
          "dry run: 0 of 3 selected files would move back to inbox/, 0 would be refused; nothing was changed",
        )
        expect(selection.exitCode).toBe(0)
        const named = await replay([...q.args, "--dry-run", BROKEN, AGAIN])
        expect(named.stdout).toBe(`${AGAIN}\n${BROKEN}\n`)
        expect(named.stderr).toContain(unchangedWarning(BROKEN, "parse"))
        expect(named.stderr).toContain(`replay: warning: ${AGAIN}: it was already replayed 3 times (--max-replays 3)`)
        expect(named.stderr).toContain("dry run: 2 of 2 selected files would move back to inbox/, 0 would be refused")
        expect(named.exitCode).toBe(0)
        expect(await fullSnapshot(q)).toEqual(before)
      })

      it("replays FILE normally once it was corrected in error/", async () => {
        await using q = await unchanged()
        const fixed = '{"msg_id": "m-x-02", "order_no": "A-1010", "seq": 1, "amount": 5.5}'
        fs.writeFileSync(join(q.root, "error", NOORDER), fixed)
        const r = await replay([...q.args, NOORDER])
        expect(r.stderr).toBe(
          `replay: moved error/${NOORDER} back to inbox/${NOORDER} (failed with missing-field; record marked ` +
            "replayed); run consume to process it\n",
        )
        expect(r.exitCode).toBe(0)
        expect(fs.readFileSync(join(q.root, "inbox", NOORDER), "utf8")).toBe(fixed)
        expect((await q.command("consume")).exitCode).toBe(0)
        expect(list(join(q.root, "done"))).toContain(NOORDER)
        expect(list(join(q.root, "error"))).toEqual([BROKEN])
      })

      it("selects by --class business only the business error, and replays it as it is", async () => {
        await using q = await business.copy()
        const bytes = fs.readFileSync(join(q.root, "error", AGAIN))
        const r = await replay([...q.args, "--class", "business"])
        expect(r.stdout).toBe(`${AGAIN}\n`)
        expect(r.exitCode).toBe(0)
        expect(fs.readFileSync(join(q.root, "inbox", AGAIN))).toEqual(bytes)
        expect(list(join(q.root, "error"))).toEqual([BROKEN, NOORDER])
        expect((await replayRows(q)).map((x) => x.file)).toEqual([AGAIN])
      })

      it("replays by --id the file in error/ that carries the msg_id", async () => {
        await using q = await business.copy()
        const moved = await replay([...q.args, "--id", DONE_ID])
        expect(moved.stdout).toBe(`${AGAIN}\n`)
        expect(moved.exitCode).toBe(0)
        expect(list(join(q.root, "inbox"))).toEqual([AGAIN])
      })

      it.each([
        ["a msg_id no message has", "m-nowhere-99"],
        ["the msg_id of a message that was processed (in done/, not error/)", "m-1003-01"],
      ])("refuses --id with %s: exit 1, nothing changed", async (_case, id) => {
        await using q = await business.copy()
        if (id === "m-1003-01") {
          const processed = await q.rows("SELECT file FROM processed WHERE msg_id = ?", [id])
          expect(processed).toHaveLength(1)
          expect(list(join(q.root, "done"))).toContain((processed[0] as { file: string }).file)
        }
        const before = await fullSnapshot(q)
        const r = await replay([...q.args, "--id", id])
        expect(r.stdout).toBe("")
        expect(r.stderr).toBe(
          `replay: no file in ${join(q.root, "error")}/ has msg_id "${id}" (a message that was processed is in done/, ` +
            "not error/); nothing was changed\n",
        )
        expect(r.exitCode).toBe(1)
        expect(await fullSnapshot(q)).toEqual(before)
      })

      it("sets the replayed file's mtime to the replay, so lag --max-age counts from it", async () => {
        await using q = await business.copy()
        const written = new Date(Date.now() - 2 * 3_600_000)
        fs.utimesSync(join(q.root, "error", AGAIN), written, written)
        const start = Date.now()
        expect((await replay([...q.args, AGAIN])).exitCode).toBe(0)
        const mtime = fs.statSync(join(q.root, "inbox", AGAIN)).mtimeMs
        expect(mtime).toBeGreaterThanOrEqual(start - 1000)
        expect(mtime).toBeLessThanOrEqual(Date.now())
        const lag = await run([lagSh, q.root, "10", "--max-age", "1h"])
        expect(lag.stdout).toBe("inbox=1 processing=0 error=2\n")
        expect(lag.exitCode).toBe(0)
        // The same file dated from its producer's write would be over the limit.
        fs.utimesSync(join(q.root, "inbox", AGAIN), written, written)
        expect((await run([lagSh, q.root, "10", "--max-age", "1h"])).exitCode).toBe(1)
      })
    })
  })

describe("dist/replay.sh and a name that starts with -", () => {
  // bun takes a -- right after the script as its own; the launcher must still pass the user's on.
  it.each([
    ["directly", (_dir: string) => replaySh],
    [
      "through a symlink",
      (dir: string) => {
        fs.symlinkSync(replaySh, join(dir, "spool-replay"))
        return join(dir, "spool-replay")
      },
    ],
  ])("takes -- FILE as its first arguments, %s", async (_how, command) => {
    await using q = await tempQueue()
    expect((await spool("consume", ["--root", q.root], { SPOOL_LEDGER_URL: "" })).exitCode).toBe(0)
    await using links = await tempDir("spool-links-")
    fs.writeFileSync(join(q.root, "error", "-1.json"), "{not json")
    const r = await run([command(links.path), "--", "-1.json"], { env: { SPOOL_ROOT: q.root } })
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain("moved error/-1.json back to inbox/-1.json")
    expect(r.exitCode).toBe(0)
    expect(list(join(q.root, "inbox"))).toEqual(["-1.json"])
  })
})
