// End to end: what every entry point shares, run as real processes: --version, and the
// conventions of its command line (--help made from its options).
import { beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot, run } from "@spool/test-support"

const version = JSON.parse(fs.readFileSync(join(repoRoot, "package.json"), "utf8")).version as string
const dist = join(repoRoot, "packages/ops/dist")

beforeAll(async () => {
  const r = await run(["bun", join(repoRoot, "packages/ops/build.ts"), "--if-stale"])
  expect(r.exitCode).toBe(0)
}, 120_000)

/** The root package scripts, one per command. */
const scripts = ["setup", "schema", "consume", "enqueue", "order-check", "compact", "stats", "verify", "lag", "replay"]

/** Every way a user starts a command. */
const entryPoints: [string, string[]][] = [
  ...scripts.map((s): [string, string[]] => [`bun run ${s}`, ["bun", "run", "--silent", s]]),
  ["bun scripts/lag.ts", ["bun", join(repoRoot, "scripts/lag.ts")]],
  ["bun scripts/replay.ts", ["bun", join(repoRoot, "scripts/replay.ts")]],
  ["dist/lag.sh", [join(dist, "lag.sh")]],
  ["dist/replay.sh", [join(dist, "replay.sh")]],
]

describe("--version", () => {
  it("is written once, in the root package.json", () => {
    expect(version).toMatch(/^\d+\.\d+\.\d+/)
  })

  it.each(entryPoints)("%s --version prints spool and the version, and exits 0", async (_name, cmd) => {
    const r = await run([...cmd, "--version"])
    expect(r.stdout).toBe(`spool ${version}\n`)
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
  })

  it.each(entryPoints.filter(([n]) => n.startsWith("dist/")))("%s -V is --version", async (_name, cmd) => {
    const r = await run([...cmd, "-V"])
    expect(r.stdout).toBe(`spool ${version}\n`)
    expect(r.exitCode).toBe(0)
  })

  it.each(entryPoints.filter(([n]) => n.startsWith("bun run ")))("%s --help lists --version", async (_name, cmd) => {
    const r = await run([...cmd, "--help"])
    expect(r.stdout).toMatch(/\n {2}-V, --version +print spool's version\n/)
    expect(r.exitCode).toBe(0)
  })
})
