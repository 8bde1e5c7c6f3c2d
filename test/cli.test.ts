// End to end: what every entry point shares, run as real processes: --version, and the
// conventions of its command line (--help made from its options).
import { beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { list, repoRoot, run, tempQueue } from "@spool/test-support"

const version = JSON.parse(fs.readFileSync(join(repoRoot, "package.json"), "utf8")).version as string
const dist = join(repoRoot, "packages/ops/dist")

beforeAll(async () => {
  const r = await run(["bun", join(repoRoot, "packages/ops/build.ts"), "--if-stale"])
  expect(r.exitCode).toBe(0)
}, 120_000)

const lagSh = join(dist, "lag.sh")
const replaySh = join(dist, "replay.sh")

/** The root package scripts, one per command, and the random-kill check's. */
const scripts = [
  "setup",
  "schema",
  "consume",
  "enqueue",
  "order-check",
  "compact",
  "stats",
  "verify",
  "lag",
  "replay",
  "torture",
]

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

describe("a command line a command does not take", () => {
  // Q stands for a queue root made for each case.
  const cases: [string, string[], string][] = [
    [
      "an unknown option",
      ["bun", "run", "--silent", "stats", "--root", "Q", "--bogus"],
      "stats: unknown option --bogus; run bun run stats --help for the options",
    ],
    [
      "a misspelt option",
      ["bun", "run", "--silent", "stats", "--root", "Q", "--windw", "1h"],
      "stats: unknown option --windw (did you mean --window?); run bun run stats --help for the options",
    ],
    [
      "a negative THRESHOLD",
      [lagSh, "Q", "-1"],
      "lag: THRESHOLD must be a whole number >= 0, not the negative number -1",
    ],
    [
      "an unknown option after the arguments",
      [lagSh, "Q", "1", "--bogus"],
      "lag: unknown option --bogus; run lag.sh --help for the options",
    ],
    [
      "a negative number as an option's value",
      [lagSh, "Q", "1", "--max-age", "-5m"],
      "lag: --max-age takes AGE, not the negative value -5m; run lag.sh --help for the options",
    ],
    [
      "a negative count",
      [replaySh, "--root", "Q", "--all", "--max-replays", "-1"],
      "replay: --max-replays takes N, not the negative number -1; run replay.sh --help for the options",
    ],
    [
      "a name that starts with - and no --",
      [replaySh, "--root", "Q", "-1.json"],
      "replay: unknown option -1.json; put -- before a FILE that starts with -; run replay.sh --help for the options",
    ],
    [
      "an option without its value",
      ["bun", "run", "--silent", "compact", "--root", "Q", "--older-than"],
      "compact: --older-than needs a value (DURATION); run bun run compact --help for the options",
    ],
    [
      "an option taking the next option as its value",
      ["bun", "run", "--silent", "consume", "--root", "--no-fsync"],
      "consume: --root needs a value (DIR) before --no-fsync; run bun run consume --help for the options",
    ],
    [
      "an unknown short option in a group",
      ["bun", "run", "--silent", "consume", "--root", "Q", "-qz"],
      "consume: unknown option -z in -qz; run bun run consume --help for the options",
    ],
    [
      "a value given to a flag",
      ["bun", "run", "--silent", "verify", "--root", "Q", "--json=yes"],
      "verify: --json is a flag and takes no value: write --json, not '--json=yes'; run bun run verify --help for the options",
    ],
    [
      "a name that starts with -h, which no option group would ask help with",
      [replaySh, "--root", "Q", "-hourly.json"],
      "replay: unknown option -o in -hourly.json; put -- before a FILE that starts with -; run replay.sh --help for the options",
    ],
    [
      "a duration past 100 years",
      ["bun", "run", "--silent", "compact", "--root", "Q", "--older-than", "999999999d"],
      'compact: --older-than takes a duration of at most 36500d (100 years), not "999999999d"',
    ],
    [
      "a ledger URL that cannot be read, not echoed since it may hold a password",
      ["bun", "run", "--silent", "stats", "--root", "Q", "--ledger", "postgres://u:se#cret@[::1"],
      "stats: --ledger/SPOOL_LEDGER_URL is not a URL that can be read (not shown here: it may hold a password); write it as postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, with %-escapes for the special characters of a password (# as %23, @ as %40)",
    ],
    [
      "a first deferral delay longer than the longest",
      ["bun", "run", "--silent", "consume", "--root", "Q", "--defer-first", "2h"],
      "consume: --defer-first (2h) is longer than --defer-max (1h), the longest wait between two attempts: lower --defer-first or raise --defer-max",
    ],
    [
      "a size limit no message fits",
      ["bun", "run", "--silent", "consume", "--root", "Q", "--max-bytes", "0"],
      'consume: --max-bytes must be at least 1 byte, not "0"',
    ],
    [
      "an empty --root, which would name the working directory",
      ["bun", "run", "--silent", "stats", "--root", ""],
      'stats: --root is empty; give the queue root\'s path (an unset variable in --root "$DIR"?)',
    ],
    [
      "a size limit past what one message may have",
      ["bun", "run", "--silent", "consume", "--root", "Q", "--max-bytes", "5g"],
      "consume: --max-bytes 5g is more than a message may have: at most 1g (each message is read whole into memory)",
    ],
    [
      "an argument to a command that takes none",
      ["bun", "run", "--silent", "schema", "--root", "Q", "extra"],
      "schema: unexpected argument extra: schema takes no arguments; run bun run schema --help for the options",
    ],
  ]

  it.each(cases)("is refused with exit 2 and one line for %s, changing nothing", async (_case, cmd, message) => {
    await using q = await tempQueue({ seed: { "a.json": { msg_id: "a", order_no: "o", seq: 1, amount: 1 } } })
    const r = await run(cmd.map((a) => (a === "Q" ? q.root : a)))
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(`${message.replaceAll("Q", q.root)}\n`)
    expect(r.exitCode).toBe(2)
    expect(list(join(q.root, "inbox"))).toEqual(["a.json"])
    expect(list(q.root)).toEqual(["deferred", "done", "error", "inbox", "processing", "tmp"])
  })

  it("still answers --help on a line it would refuse", async () => {
    const r = await run([lagSh, "--bogus", "--help"])
    expect(r.stdout).toStartWith("Usage: lag.sh [DIR] THRESHOLD")
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
  })
})

describe("-q, which every command takes", () => {
  const spool = (args: string[]) => run(["bun", join(repoRoot, "packages/spool/bin/spool.ts"), ...args])

  it("prints nothing on success, whatever the command, rejected files included", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    const fixed = join(q.path, "fixed.json")
    fs.writeFileSync(fixed, JSON.stringify({ msg_id: "m-new", order_no: "9", seq: 1, amount: 1 }))
    const lines: string[][] = [
      ["setup", "--root", join(q.path, "other")],
      ["consume", "--root", q.root],
      ["schema", "--root", q.root],
      ["order-check", "--root", q.root],
      ["stats", "--root", q.root],
      ["verify", "--root", q.root],
      ["list", "--root", q.root],
      ["show", "--root", q.root, "evt-broken-0001.json"],
      ["lag", "--root", q.root, "100"],
      ["enqueue", "--root", q.root, fixed],
      ["compact", "--root", q.root, "--older-than", "90d"],
    ]
    for (const line of lines) {
      const r = await spool([...line, "-q"])
      expect({ line, out: r.stdout + r.stderr, code: r.exitCode }).toEqual({ line, out: "", code: 0 })
    }
    expect(list(join(q.root, "error"))).toEqual(["evt-broken-0001.json", "evt-noorder-0002.json"])
    // A failure corrected in place, as an operator would, goes back without a word.
    fs.writeFileSync(
      join(q.root, "error", "evt-broken-0001.json"),
      JSON.stringify({ msg_id: "m-fixed", order_no: "8", seq: 1, amount: 2 }),
    )
    const replay = await spool(["replay", "--root", q.root, "evt-broken-0001.json", "-q"])
    expect(replay.stdout + replay.stderr).toBe("")
    expect(replay.exitCode).toBe(0)
  })

  it("still says what needs a person: a check that fails, a refusal", async () => {
    await using q = await tempQueue({ seed: { "a.json": {}, "b.json": {} } })
    const lag = await spool(["lag", "--root", q.root, "1", "-q"])
    expect(lag.stderr).toBe("lag: inbox=2 is over the threshold 1\n")
    expect(lag.exitCode).toBe(1)
    const replay = await spool(["replay", "--root", q.root, "nothing.json", "-q"])
    expect(replay.stderr).toStartWith("replay: ")
    expect(replay.exitCode).toBe(1)
  })
})
