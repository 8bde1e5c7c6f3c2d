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

const runners = [
  ["bun scripts/lag.ts", (args: string[]) => run(["bun", join(repoRoot, "scripts/lag.ts"), ...args])],
  ["dist/lag.sh", (args: string[]) => run([lagSh, ...args])],
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
    await using q = await tempQueue({ seed: { "a.json": {}, "notes.txt": "x" } })
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
      /^inbox=1 processing=0 error=0 done=1 oldest_inbox_age_seconds=36\d\d oldest_processing_age_seconds=0\n$/,
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
    expect(lines.filter((l) => l.startsWith("# TYPE "))).toHaveLength(5)
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
