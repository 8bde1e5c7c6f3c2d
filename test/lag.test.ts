// End to end: `bun scripts/lag.ts` and the built `packages/ops/dist/lag.sh`, as real processes.
import { beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { list, repoRoot, run, tempDir, tempQueue } from "@spool/test-support"

const dist = join(repoRoot, "packages/ops/dist")
const lagSh = join(dist, "lag.sh")

beforeAll(async () => {
  // turbo builds @spool/ops before these tests; a direct `bun test` builds it here if dist/ is
  // missing or older than its sources.
  const r = await run(["bun", join(repoRoot, "packages/ops/build.ts"), "--if-stale"])
  expect(r.stderr).not.toContain("failed")
  expect(r.exitCode).toBe(0)
}, 120_000)

type RunOptions = Parameters<typeof run>[1]

const runners = [
  [
    "bun scripts/lag.ts",
    (args: string[], o?: RunOptions) => run(["bun", join(repoRoot, "scripts/lag.ts"), ...args], o),
  ],
  ["dist/lag.sh", (args: string[], o?: RunOptions) => run([lagSh, ...args], o)],
] as const

function age(path: string, seconds: number): void {
  const t = new Date(Date.now() - seconds * 1000)
  fs.utimesSync(path, t, t)
}

describe.each(runners)("%s", (name, lag) => {
  it("prints the one line and exits 0 when inbox holds exactly THRESHOLD files", async () => {
    await using q = await tempQueue({ seed: { "a.json": {}, "b.json": {}, "c.json": {} } })
    fs.writeFileSync(join(q.root, "processing", "p.json"), "{}")
    fs.writeFileSync(join(q.root, "error", "e1.json"), "x")
    fs.writeFileSync(join(q.root, "error", "e2.json"), "y")
    const r = await lag([q.root, "3"])
    expect(r.stdout).toBe("inbox=3 processing=1 error=2\n")
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
  })

  it("prints the same line and exits 1 when inbox holds one file more than THRESHOLD", async () => {
    await using q = await tempQueue({ seed: { "a.json": {}, "b.json": {}, "c.json": {} } })
    const r = await lag([q.root, "2"])
    expect(r.stdout).toBe("inbox=3 processing=0 error=0\n")
    expect(r.stderr).toContain("over the threshold 2")
    expect(r.exitCode).toBe(1)
  })

  it("counts only regular files at the top of each directory", async () => {
    await using q = await tempQueue({ seed: { "a.json": {}, "b.json": "x" } })
    fs.mkdirSync(join(q.root, "inbox", "dir.json"))
    fs.writeFileSync(join(q.root, "inbox", "dir.json", "nested.json"), "{}")
    fs.symlinkSync(join(q.root, "inbox", "a.json"), join(q.root, "inbox", "link.json"))
    expect(Bun.spawnSync(["mkfifo", join(q.root, "inbox", "fifo.json")]).exitCode).toBe(0)
    const r = await lag([q.root, "10"])
    expect(r.stdout).toBe("inbox=2 processing=0 error=0\n")
    expect(r.exitCode).toBe(0)
  })

  it("takes DIR relative to the working directory", async () => {
    await using q = await tempQueue({ seed: { "a.json": {} } })
    const r = await run([...commandOf(name), "q", "0"], { cwd: q.path })
    expect(r.stdout).toBe("inbox=1 processing=0 error=0\n")
    expect(r.exitCode).toBe(1)
  })

  it("counts in inbox= only the names consume takes, and the others apart as ignored", async () => {
    await using q = await tempQueue({
      seed: { "a.json": {}, ".b.json": {}, "c.json.part": "{", "notes.txt": "x", ".tmp": "x" },
    })
    const line = await lag([q.root, "1"])
    expect(line.stdout).toBe("inbox=1 processing=0 error=0\n")
    expect(line.stderr).toBe("")
    expect(line.exitCode).toBe(0)
    const all = await lag([q.root, "1", "--all"])
    expect(all.stdout).toMatch(/^inbox=1 processing=0 error=0 done=0 .* ignored=4 /)
    const json = JSON.parse((await lag([q.root, "1", "--json"])).stdout)
    expect([json.inbox, json.ignored]).toEqual([1, 4])
    const plugin = await lag([q.root, "--warning", "0"])
    expect(plugin.stdout).toContain(" ignored=4;;;0 ")
  })

  it("ends the line in stalled and exits 1 when files wait and nothing finished for --stalled-after", async () => {
    await using q = await tempQueue({ seed: { "a.json": {}, "b.json": {} } })
    age(join(q.root, "inbox", "a.json"), 1800)
    for (const d of ["done", "error"]) age(join(q.root, d), 1200)
    const stalled = await lag([q.root, "10", "--stalled-after", "10m"])
    expect(stalled.stdout).toBe("inbox=2 processing=0 error=0 stalled\n")
    expect(stalled.stderr).toBe(
      "lag: stalled: nothing reached done/ or error/ for 20m while 2 files wait (--stalled-after 10m)\n",
    )
    expect(stalled.exitCode).toBe(1)
    // A file finished just now (a rename into done/ sets its mtime): no longer stalled.
    fs.writeFileSync(join(q.root, "inbox", "c.json"), "{}")
    fs.renameSync(join(q.root, "inbox", "c.json"), join(q.root, "done", "c.json"))
    const moving = await lag([q.root, "10", "--stalled-after", "10m"])
    expect(moving.stdout).toBe("inbox=2 processing=0 error=0\n")
    expect(moving.exitCode).toBe(0)
  })

  it("prints the age histogram of inbox/, processing/ and error/, without THRESHOLD", async () => {
    await using q = await tempQueue({ seed: { "a.json": {}, "b.json": {}, "c.json": {}, ".x.json": {} } })
    age(join(q.root, "inbox", "a.json"), 60)
    age(join(q.root, "inbox", "b.json"), 25 * 60)
    age(join(q.root, "inbox", "c.json"), 3 * 86_400)
    fs.writeFileSync(join(q.root, "error", "e.json"), "x")
    const r = await lag([q.root, "--histogram"])
    expect(r.stdout).toBe(
      [
        "           T 5 10 20 40 80 160 320 640 1280 1280+",
        "     inbox 3 1  0  0  1  0   0   0   0    0     1",
        "processing 0 0  0  0  0  0   0   0   0    0     0",
        "     error 1 1  0  0  0  0   0   0   0    0     0",
        "  deferred 0 0  0  0  0  0   0   0   0    0     0",
        "",
      ].join("\n"),
    )
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    const over = await lag([q.root, "2", "--histogram", "--json"])
    const o = JSON.parse(over.stdout)
    expect(o.histogram).toEqual({
      bucket_minutes: [5, 10, 20, 40, 80, 160, 320, 640, 1280],
      inbox: { total: 3, counts: [1, 0, 0, 1, 0, 0, 0, 0, 0, 1] },
      processing: { total: 0, counts: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0] },
      error: { total: 1, counts: [1, 0, 0, 0, 0, 0, 0, 0, 0, 0] },
      deferred: { total: 0, counts: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0] },
    })
    expect(over.exitCode).toBe(1)
  })

  describe("as a Nagios/Icinga plugin", () => {
    const limits = ["--warning", "10", "--critical", "50", "--warning-age", "5m", "--critical-age", "15m"]

    it("prints SPOOL OK with perfdata and exits 0 within every limit", async () => {
      await using q = await tempQueue({ seed: { "a.json": {}, "b.json": {}, "c.json": {} } })
      age(join(q.root, "inbox", "a.json"), 12)
      const r = await lag([q.root, ...limits])
      expect(r.stdout).toMatch(
        /^SPOOL OK - inbox=3 processing=0 error=0 deferred=0 ignored=0 oldest=1\ds \| inbox=3;10;50;0 processing=0;;;0 error=0;;;0 ignored=0;;;0 deferred=0;;;0 oldest=1\ds;300;900;0 oldest_processing=0s;;;0 idle=\d+s;;;0\n$/,
      )
      expect(r.stderr).toBe("")
      expect(r.exitCode).toBe(0)
    })

    it.each([
      ["WARNING over --warning", 11, 0, "SPOOL WARNING - inbox=11 is over the warning threshold 10: ", 1],
      ["CRITICAL over --critical", 51, 0, "SPOOL CRITICAL - inbox=51 is over the critical threshold 50: ", 2],
      [
        "WARNING over --warning-age",
        1,
        600,
        "SPOOL WARNING - the oldest message in inbox/ is 10m old, over the warning age 5m: ",
        1,
      ],
      [
        "CRITICAL over --critical-age",
        1,
        3600,
        "SPOOL CRITICAL - the oldest message in inbox/ is 60m old, over the critical age 15m: ",
        2,
      ],
    ] as const)("prints %s", async (_case, files, oldest, start, code) => {
      await using q = await tempQueue()
      for (let i = 0; i < files; i++) q.put(`m${i}.json`, {})
      if (oldest > 0) age(join(q.root, "inbox", "m0.json"), oldest)
      const r = await lag([q.root, ...limits])
      expect(r.stdout).toStartWith(start)
      expect(r.stdout).toMatch(/ \| inbox=\d+;10;50;0 .* oldest=\d+s;300;900;0 .*\n$/)
      expect(r.stdout.trimEnd()).not.toContain("\n")
      expect(r.exitCode).toBe(code)
    })

    it("is CRITICAL with stalled in the text when files wait and nothing finished for --stalled-after", async () => {
      await using q = await tempQueue({ seed: { "a.json": {} } })
      age(join(q.root, "inbox", "a.json"), 900)
      for (const d of ["done", "error"]) age(join(q.root, d), 700)
      const r = await lag([q.root, "--warning", "10", "--stalled-after", "10m"])
      expect(r.stdout).toStartWith(
        "SPOOL CRITICAL - stalled: nothing reached done/ or error/ for 11m while 1 file waits: inbox=1 ",
      )
      expect(r.stdout).toContain(" idle=70")
      expect(r.exitCode).toBe(2)
    })

    it("is UNKNOWN (3) on stdout for a DIR that is not a queue", async () => {
      await using d = await tempDir()
      const r = await lag([join(d.path, "nowhere"), ...limits])
      expect(r.stdout).toStartWith(`SPOOL UNKNOWN - ${join(d.path, "nowhere")} is not a spool queue: inbox/ is missing`)
      expect(r.stdout.trimEnd()).not.toContain("\n")
      expect(r.stderr).toBe("")
      expect(r.exitCode).toBe(3)
    })

    it.each([
      ["a word for --warning", ["Q", "--warning", "ten"], "--warning takes a Nagios range"],
      ["a reversed range", ["Q", "--critical-error", "20:10"], "--critical-error takes a Nagios range"],
      ["-q", ["Q", "--warning", "5", "-q"], "-q does not go with a plugin"],
      [
        "a bare number for --critical-age",
        ["Q", "--critical-age", "15"],
        "--critical-age takes a duration with a unit",
      ],
      ["THRESHOLD as well", ["Q", "10", "--warning", "5"], "not THRESHOLD"],
      ["an unknown option", ["Q", "--warning", "5", "--bogus"], "--bogus"],
      ["--critical below --warning", ["Q", "--warning", "5", "--critical", "2"], "--critical 2 is below --warning 5"],
      ["--json", ["Q", "--warning", "5", "--json"], "--json is not a plugin's output"],
      ["DIR and --root", ["Q", "--root", "Q", "--warning", "5"], "both name the root"],
    ])("is UNKNOWN (3) on stdout for %s", async (_case, args, text) => {
      await using q = await tempQueue()
      const r = await lag(args.map((a) => (a === "Q" ? q.root : a)))
      expect(r.stdout).toStartWith("SPOOL UNKNOWN - ")
      expect(r.stdout).toContain(text)
      expect(r.stderr).toBe("")
      expect(r.exitCode).toBe(3)
    })
  })

  describe("its root, found as every command finds it", () => {
    it("takes --root, $SPOOL_ROOT, or the queue the working directory is in, keeping DIR THRESHOLD", async () => {
      await using q = await tempQueue({ seed: { "a.json": {}, "b.json": {} } })
      const line = "inbox=2 processing=0 error=0\n"
      const ways: [string[], RunOptions][] = [
        [[q.root, "1"], {}],
        [["--root", q.root, "1"], {}],
        [["1", "--root", q.root], {}],
        [["1"], { env: { SPOOL_ROOT: q.root } }],
        [["1"], { cwd: q.root, env: { SPOOL_ROOT: "" } }],
        [["1"], { cwd: join(q.root, "error"), env: { SPOOL_ROOT: "" } }],
      ]
      for (const [args, o] of ways) {
        const r = await lag(args, o)
        expect({ args, stdout: r.stdout, code: r.exitCode }).toEqual({ args, stdout: line, code: 1 })
      }
      const plugin = await lag(["--critical", "1"], { env: { SPOOL_ROOT: q.root } })
      expect(plugin.stdout).toStartWith("SPOOL CRITICAL - inbox=2 is over the critical threshold 1: ")
      expect(plugin.exitCode).toBe(2)
      const both = await lag([q.root, "1", "--root", q.root])
      expect(both.stderr).toContain("both name the root")
      expect(both.exitCode).toBe(2)
    })

    it("points at the enclosing root, not at setup, for a DIR inside a queue", async () => {
      await using q = await tempQueue()
      const r = await lag([".", "0"], { cwd: join(q.root, "error") })
      expect(r.stdout).toBe("")
      expect(r.stderr).toBe(
        `lag: ${join(q.root, "error")} is the error/ directory of the queue ${q.root}, not a queue root; use --root ${q.root}\n`,
      )
      expect(r.exitCode).toBe(2)
    })
  })

  describe("for cron", () => {
    it("exits 0 and prints nothing once --textfile is written, the verdict being in the metrics", async () => {
      await using q = await tempQueue({ seed: { "a.json": {}, "b.json": {} } })
      const prom = join(q.path, "lag.prom")
      const r = await lag([q.root, "1", "--format", "prometheus", "--textfile", prom])
      expect(r.stdout + r.stderr).toBe("")
      expect(r.exitCode).toBe(0)
      expect(fs.readFileSync(prom, "utf8")).toContain(`spool_lag_ok{root="${q.root}"} 0\n`)
    })

    it("prints nothing with -q within the limits, and only the reason when over", async () => {
      await using q = await tempQueue({ seed: { "a.json": {}, "b.json": {} } })
      const ok = await lag([q.root, "2", "-q"])
      expect(ok.stdout + ok.stderr).toBe("")
      expect(ok.exitCode).toBe(0)
      const over = await lag([q.root, "1", "-q"])
      expect(over.stdout).toBe("")
      expect(over.stderr).toBe("lag: inbox=2 is over the threshold 1\n")
      expect(over.exitCode).toBe(1)
    })
  })

  describe("as a plugin with error/ and deferred/ thresholds and Nagios ranges", () => {
    it("is CRITICAL for failures in error/ over --critical-error, and OK without that threshold", async () => {
      await using q = await tempQueue()
      fs.writeFileSync(join(q.root, "error", "e1.json"), "x")
      fs.writeFileSync(join(q.root, "error", "e2.json"), "x")
      const ok = await lag([q.root, "--warning", "10"])
      expect(ok.stdout).toStartWith("SPOOL OK - ")
      const r = await lag([q.root, "--warning", "10", "--warning-error", "0", "--critical-error", "1"])
      expect(r.stdout).toStartWith("SPOOL CRITICAL - error=2 is over the critical threshold 1: ")
      expect(r.stdout).toContain(" error=2;0;1;0 ")
      expect(r.exitCode).toBe(2)
    })

    it("is WARNING for deferred/ files over --warning-deferred", async () => {
      await using q = await tempQueue()
      fs.writeFileSync(join(q.root, "deferred", "d.json"), "x")
      const r = await lag([q.root, "--warning-deferred", "0"])
      expect(r.stdout).toStartWith("SPOOL WARNING - deferred=1 is over the warning threshold 0: ")
      expect(r.exitCode).toBe(1)
    })

    it.each([
      ["10:20", 5, "WARNING", "inbox=5 is outside the warning range 10:20"],
      ["10:20", 15, "OK", undefined],
      ["@10:20", 15, "WARNING", "inbox=15 is inside the warning range @10:20"],
      ["~:10", 11, "WARNING", "inbox=11 is over the warning threshold 10"],
      ["~:10", 3, "OK", undefined],
    ] as const)("reads --warning %s with %d files as %s", async (range, files, state, reason) => {
      await using q = await tempQueue()
      for (let i = 0; i < files; i++) q.put(`m${i}.json`, {})
      const r = await lag([q.root, "--warning", range])
      expect(r.stdout).toStartWith(`SPOOL ${state} - ${reason === undefined ? "" : `${reason}: `}inbox=${files} `)
      expect(r.stdout).toContain(` | inbox=${files};${range};;0 `)
      expect(r.exitCode).toBe(state === "OK" ? 0 : 1)
    })
  })

  // The source entry loads @spool/core whole (arktype included, about a second per start on
  // this machine), so it gets a sample of the usage errors; the built lag.sh gets all of them.
  const isSource = name !== "dist/lag.sh"
  const usageSample = new Set(["no THRESHOLD", "a fractional THRESHOLD", "a negative THRESHOLD", "a bad --max-age"])

  it.each(
    (
      [
        ["no arguments", []],
        ["no THRESHOLD", ["."]],
        ["a fractional THRESHOLD", ["Q", "1.5"]],
        ["a word as THRESHOLD", ["Q", "ten"]],
        ["a negative THRESHOLD", ["Q", "-1"]],
        ["an extra argument", ["Q", "1", "2"]],
        ["an unknown option", ["Q", "1", "--bogus"]],
        ["a bad --max-age", ["Q", "1", "--max-age", "soon"]],
        ["an unknown --format", ["Q", "1", "--format", "xml"]],
        ["--textfile without --format prometheus", ["Q", "1", "--textfile", "out.prom"]],
      ] as [string, string[]][]
    ).filter(([c]) => !isSource || usageSample.has(c)),
  )("exits 2 with a message on stderr for %s", async (_case, args) => {
    await using q = await tempQueue()
    const r = await lag(args.map((a) => (a === "Q" ? q.root : a)))
    expect(r.stdout).toBe("")
    expect(r.stderr).toMatch(/^lag: .+/)
    expect(r.exitCode).toBe(2)
  })

  it.each(isSource ? ["done"] : ["inbox", "processing", "done", "error"])(
    "exits 2 naming the directory when %s/ is missing (not a queue)",
    async (missing) => {
      await using q = await tempQueue()
      fs.rmSync(join(q.root, missing), { recursive: true })
      const r = await lag([q.root, "10"])
      expect(r.stdout).toBe("")
      expect(r.stderr).toContain(`${missing}/ is missing`)
      expect(r.exitCode).toBe(2)
    },
  )

  it("exits 2 for a DIR that does not exist", async () => {
    await using d = await tempDir()
    const r = await lag([join(d.path, "nowhere"), "10"])
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain("is not a spool queue")
    expect(r.exitCode).toBe(2)
  })

  it("prints every field as one JSON object with --json", async () => {
    await using q = await tempQueue({ seed: { "a.json": {}, "b.json": {} } })
    age(join(q.root, "inbox", "a.json"), 120)
    fs.writeFileSync(join(q.root, "processing", "p.json"), "{}")
    age(join(q.root, "processing", "p.json"), 30)
    for (const n of ["d1.json", "d2.json", "d3.json"]) fs.writeFileSync(join(q.root, "done", n), "{}")
    const r = await lag([q.root, "1", "--json"])
    const o = JSON.parse(r.stdout)
    expect(r.stdout.trimEnd()).not.toContain("\n")
    expect(o).toMatchObject({
      root: q.root,
      inbox: 2,
      processing: 1,
      error: 0,
      done: 3,
      threshold: 1,
      max_age_seconds: null,
      ok: false,
    })
    expect(o.violations).toEqual(["inbox=2 is over the threshold 1"])
    // The inbox age comes from an mtime set 120 s ago; the bound allows a slow machine.
    expect(o.oldest_inbox_age_seconds).toBeGreaterThanOrEqual(120)
    expect(o.oldest_inbox_age_seconds).toBeLessThan(180)
    // processing/ is dated by ctime (the claim): setting the mtime back does not age it.
    expect(o.oldest_processing_age_seconds).toBeLessThan(30)
    expect(r.exitCode).toBe(1)
  })

  it("adds done and the ages to the line with --all", async () => {
    await using q = await tempQueue({ seed: { "a.json": {} } })
    age(join(q.root, "inbox", "a.json"), 3600)
    fs.writeFileSync(join(q.root, "done", "d.json"), "{}")
    const r = await lag([q.root, "5", "--all"])
    expect(r.stdout).toMatch(
      /^inbox=1 processing=0 error=0 done=1 oldest_inbox_age_seconds=36\d\d oldest_processing_age_seconds=0 ignored=0 idle_seconds=\d+ deferred=0\n$/,
    )
    expect(r.exitCode).toBe(0)
  })

  it("exits 1 with --max-age when the oldest inbox message is older, and 0 when it is younger", async () => {
    await using q = await tempQueue({ seed: { "old.json": {}, "new.json": {} } })
    age(join(q.root, "inbox", "old.json"), 600)
    const over = await lag([q.root, "10", "--max-age", "5m"])
    expect(over.stdout).toBe("inbox=2 processing=0 error=0\n")
    expect(over.stderr).toContain("over --max-age 5m")
    expect(over.exitCode).toBe(1)
    const under = await lag([q.root, "10", "--max-age", "15m"])
    expect(under.stdout).toBe("inbox=2 processing=0 error=0\n")
    expect(under.stderr).toBe("")
    expect(under.exitCode).toBe(0)
  })

  it("passes --max-age on an empty inbox, whatever waits in processing/", async () => {
    await using q = await tempQueue()
    fs.writeFileSync(join(q.root, "processing", "stuck.json"), "{}")
    age(join(q.root, "processing", "stuck.json"), 86_400)
    const r = await lag([q.root, "0", "--max-age", "1s"])
    expect(r.stdout).toBe("inbox=0 processing=1 error=0\n")
    expect(r.exitCode).toBe(0)
  })

  it("prints the Prometheus exposition format with --format prometheus", async () => {
    await using q = await tempQueue({ seed: { "a.json": {} } })
    const r = await lag([q.root, "0", "--format", "prometheus", "--max-age", "1h"])
    const lines = r.stdout.trimEnd().split("\n")
    for (const l of lines)
      expect(l).toMatch(/^(# (HELP|TYPE) spool_\w+ .+|spool_\w+\{root="[^"]*"(,dir="\w+")?\} [0-9.]+)$/)
    expect(lines).toContain(`spool_messages{root="${q.root}",dir="inbox"} 1`)
    expect(lines).toContain(`spool_messages{root="${q.root}",dir="done"} 0`)
    expect(lines).toContain(`spool_lag_max_age_seconds{root="${q.root}"} 3600`)
    expect(lines).toContain(`spool_lag_ok{root="${q.root}"} 0`)
    expect(lines.filter((l) => l.startsWith("# TYPE "))).toHaveLength(7)
    expect(r.exitCode).toBe(1)
  })

  it("writes the exposition atomically to --textfile and nothing to stdout", async () => {
    await using q = await tempQueue({ seed: { "a.json": {} } })
    await using out = await tempDir()
    const path = join(out.path, "spool.prom")
    fs.writeFileSync(path, "old content\n")
    const r = await lag([q.root, "5", "--format", "prometheus", "--textfile", path])
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    const text = fs.readFileSync(path, "utf8")
    expect(text).toContain(`spool_messages{root="${q.root}",dir="inbox"} 1\n`)
    expect(text).toContain(`spool_lag_ok{root="${q.root}"} 1\n`)
    expect(list(out.path)).toEqual(["spool.prom"])
  })

  it("exits 3 when --textfile cannot be written", async () => {
    await using q = await tempQueue()
    const r = await lag([q.root, "5", "--format", "prometheus", "--textfile", join(q.path, "no", "such", "dir.prom")])
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain("cannot write")
    expect(r.exitCode).toBe(3)
  })

  it("prints usage with --help and exits 0", async () => {
    const r = await lag(["--help"])
    expect(r.stdout).toContain("Usage:")
    expect(r.stdout).toContain("--max-age")
    expect(r.exitCode).toBe(0)
  })
})

/** The command line of a runner, for tests that need their own working directory. */
function commandOf(name: string): string[] {
  return name === "dist/lag.sh" ? [lagSh] : ["bun", join(repoRoot, "scripts/lag.ts")]
}

describe("dist/lag.sh as installed", () => {
  /** Runs with an environment that has nothing but a directory holding `bun` on PATH. */
  async function onlyBun(cmd: string[], cwd: string) {
    await using bin = await tempDir("spool-bin-")
    fs.symlinkSync(process.execPath, join(bin.path, "bun"))
    const p = Bun.spawn(cmd, { cwd, env: { PATH: bin.path }, stdout: "pipe", stderr: "pipe", stdin: "ignore" })
    const [stdout, stderr, exitCode] = await Promise.all([
      new Response(p.stdout).text(),
      new Response(p.stderr).text(),
      p.exited,
    ])
    return { stdout, stderr, exitCode }
  }

  it("runs as ./lag.sh from dist/ with only bun on PATH", async () => {
    await using q = await tempQueue({ seed: { "a.json": {} } })
    const r = await onlyBun(["./lag.sh", q.root, "1"], dist)
    expect(r.stdout).toBe("inbox=1 processing=0 error=0\n")
    expect(r.exitCode).toBe(0)
  })

  it("runs as sh lag.sh from dist/ and from another directory", async () => {
    await using q = await tempQueue({ seed: { "a.json": {} } })
    const here = await onlyBun(["/bin/sh", "lag.sh", q.root, "0"], dist)
    expect(here.stdout).toBe("inbox=1 processing=0 error=0\n")
    expect(here.exitCode).toBe(1)
    const there = await onlyBun(["/bin/sh", lagSh, "q", "1"], q.path)
    expect(there.stdout).toBe("inbox=1 processing=0 error=0\n")
    expect(there.exitCode).toBe(0)
  })

  it("runs through a symlink placed elsewhere, as an install into a bin directory would", async () => {
    await using q = await tempQueue({ seed: { "a.json": {} } })
    await using links = await tempDir("spool-links-")
    fs.symlinkSync(lagSh, join(links.path, "spool-lag"))
    fs.symlinkSync(join(links.path, "spool-lag"), join(links.path, "lag-again"))
    for (const cmd of [[join(links.path, "spool-lag")], ["./lag-again"], ["/bin/sh", "spool-lag"]]) {
      const r = await onlyBun([...cmd, q.root, "1", "--json"], links.path)
      expect(r.stderr).toBe("")
      expect(JSON.parse(r.stdout).inbox).toBe(1)
      expect(r.exitCode).toBe(0)
    }
  })
})

describe("bun spool lag", () => {
  const spoolLag = (args: string[]) => run(["bun", join(repoRoot, "packages/spool/bin/spool.ts"), "lag", ...args])

  it("is the same plugin: OK with perfdata, and UNKNOWN (3) for a DIR that is not a queue", async () => {
    await using q = await tempQueue({ seed: { "a.json": {} } })
    const ok = await spoolLag([q.root, "--warning", "5", "--critical", "9"])
    // The file's age is however long the command took to start: any whole number of seconds.
    expect(ok.stdout).toMatch(
      /^SPOOL OK - inbox=1 processing=0 error=0 deferred=0 ignored=0 oldest=\d+s \| inbox=1;5;9;0 /,
    )
    expect(ok.exitCode).toBe(0)
    const unknown = await spoolLag([join(q.path, "nowhere"), "--critical", "9"])
    expect(unknown.stdout).toStartWith("SPOOL UNKNOWN - ")
    expect(unknown.exitCode).toBe(3)
  })
})

describe("the monitoring page's lag examples, run as written", () => {
  const page = fs.readFileSync(join(repoRoot, "docs/monitoring.md"), "utf8")
  const lagSection = page.slice(page.indexOf("## lag\n"), page.indexOf("## stats\n"))
  /** The page's paths, pointed at this checkout and a temp queue. */
  const localize = (line: string, root: string, textfiles: string) =>
    line
      .replaceAll("/opt/spool", repoRoot)
      .replaceAll("/var/spool/orders", root)
      .replaceAll("/var/lib/node_exporter/textfile", textfiles)
  const cronLines = lagSection.split("\n").filter((l) => /^(\*|\*\/\d+) \* \* \* \* /.test(l))
  const cronCommand = (line: string) => line.split(" ").slice(5).join(" ")

  it("has the two cron lines and the Nagios definitions", () => {
    expect(cronLines).toHaveLength(2)
    expect(lagSection).toContain("command_name    check_spool")
  })

  it("writes the textfile with the first cron line", async () => {
    await using q = await tempQueue({ seed: { "a.json": {} } })
    await using out = await tempDir()
    const r = await run(["/bin/sh", "-c", localize(cronCommand(cronLines[0] ?? ""), q.root, out.path)])
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    expect(fs.readFileSync(join(out.path, "spool_orders.prom"), "utf8")).toContain(
      `spool_messages{root="${q.root}",dir="inbox"} 1\n`,
    )
  })

  it("prints nothing with the mailing cron line while the queue flows, and the reason once it is stalled", async () => {
    await using q = await tempQueue({ seed: { "a.json": {} } })
    const command = localize(cronCommand(cronLines[1] ?? ""), q.root, q.path)
    const flowing = await run(["/bin/sh", "-c", command])
    expect(flowing.stdout + flowing.stderr).toBe("")
    expect(flowing.exitCode).toBe(0)
    age(join(q.root, "inbox", "a.json"), 700)
    for (const d of ["done", "error"]) age(join(q.root, d), 700)
    const stalled = await run(["/bin/sh", "-c", command])
    expect(stalled.stdout).toBe("")
    expect(stalled.stderr).toStartWith("lag: stalled: nothing reached done/ or error/ for 11m while 1 file waits")
    expect(stalled.exitCode).toBe(1)
  })

  it("runs the Nagios command definition with the service's arguments, as Nagios would (no shell)", async () => {
    const commandLine = /command_line\s+(.+)/.exec(lagSection)?.[1] ?? ""
    const checkCommand = /check_command\s+(.+)/.exec(lagSection)?.[1] ?? ""
    const [, ...args] = checkCommand.split("!")
    await using q = await tempQueue()
    for (let i = 0; i < 1001; i++) q.put(`m${i}.json`, {})
    const argv = commandLine
      .replaceAll("$USER1$", dist)
      .replace(/\$ARG(\d)\$/g, (_, n) => args[Number(n) - 1] ?? "")
      .split(/\s+/)
      .map((a) => localize(a, q.root, q.path))
    const r = await run(argv)
    expect(r.stdout).toStartWith("SPOOL WARNING - inbox=1001 is over the warning threshold 1000: ")
    expect(r.stdout).toContain(" | inbox=1001;1000;5000;0 ")
    expect(r.exitCode).toBe(1)
    fs.rmSync(join(q.root, "inbox", "m0.json"))
    const ok = await run(argv)
    expect(ok.stdout).toStartWith("SPOOL OK - inbox=1000 ")
    expect(ok.exitCode).toBe(0)
  })

  it("prints the histogram shown", async () => {
    const shown = /\$ (lag\.sh \S+ --histogram)\n([\s\S]*?)```/.exec(lagSection)
    await using q = await tempQueue({ seed: { "a.json": {}, "b.json": {}, "c.json": {} } })
    age(join(q.root, "inbox", "a.json"), 60)
    age(join(q.root, "inbox", "b.json"), 25 * 60)
    age(join(q.root, "inbox", "c.json"), 3 * 86_400)
    fs.writeFileSync(join(q.root, "error", "e.json"), "x")
    const argv = (shown?.[1] ?? "").split(" ").map((a) => (a === "lag.sh" ? lagSh : localize(a, q.root, q.path)))
    const r = await run(argv)
    expect(r.stdout).toBe(shown?.[2] ?? "(no example)")
    expect(r.exitCode).toBe(0)
  })
})
