// End to end: the spool command, as `bun spool` and as its bin file, run as real processes. Each
// subcommand is the command its own entry point runs: same output, same exit code.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { exitCodesLine, type Options, runCommand, type ValueOption } from "@spool/cli"
import { commands } from "@spool/spool"
import { captured, fixturesDir, list, repoRoot, run, tempDir, tempQueue } from "@spool/test-support"
import { parseAmqpUrl } from "../packages/core/src/source/amqp/url.ts"
import { parseMqttUrl } from "../packages/core/src/source/mqtt/url.ts"
import { parseJetStreamUrl } from "../packages/core/src/source/nats/url.ts"
import { parseRedisUrl } from "../packages/core/src/source/redis/url.ts"

/** Each source scheme's own URL parser: an example's --source must be one its adapter takes. */
const sourceParsers: Record<string, (url: string) => unknown> = {
  amqp: parseAmqpUrl,
  amqps: parseAmqpUrl,
  nats: parseJetStreamUrl,
  redis: parseRedisUrl,
  rediss: parseRedisUrl,
  mqtt: parseMqttUrl,
  mqtts: parseMqttUrl,
}

const version = JSON.parse(fs.readFileSync(join(repoRoot, "package.json"), "utf8")).version as string
const bin = join(repoRoot, "packages/spool/bin/spool.ts")
const spool = (args: string[]) => run(["bun", bin, ...args])
const specs = await Promise.all(Object.entries(commands).map(async ([n, load]) => [n, (await load()).spec] as const))

describe("spool", () => {
  it("lists every command with the summary from its spec for --help, and exits 0", async () => {
    const r = await spool(["--help"])
    expect(r.stdout).toStartWith("Usage: spool COMMAND [ARGUMENTS] [OPTIONS]\n       spool help COMMAND\n")
    for (const [name, spec] of specs)
      expect(r.stdout).toMatch(new RegExp(`\\n {2}${name} +${RegExp.escape(spec.summary)}\\n`))
    expect(r.stdout).toContain("-V, --version")
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    expect((await spool(["help"])).stdout).toBe(r.stdout)
    expect((await spool(["-h"])).stdout).toBe(r.stdout)
  })

  it("runs as bun spool, the root package script", async () => {
    const r = await run(["bun", "run", "--silent", "spool", "--version"])
    expect(r.stdout).toBe(`spool ${version}\n`)
    expect(r.exitCode).toBe(0)
  })

  it.each([["--version"], ["-V"]])("prints the version for %s", async (flag) => {
    const r = await spool([flag])
    expect(r.stdout).toBe(`spool ${version}\n`)
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
  })

  it.each(specs)("spool help %s is that command's --help, whose usage says spool %s", async (name) => {
    const help = await spool(["help", name])
    const own = await spool([name, "--help"])
    expect(help.stdout).toStartWith(`Usage: spool ${name} `)
    expect(help.stdout).toBe(own.stdout)
    expect(help.stdout).not.toMatch(/bun run [a-z-]+ \[|[a-z]+\.sh /)
    expect(help.exitCode).toBe(0)
    expect((await spool([name, "--version"])).stdout).toBe(`spool ${version}\n`)
  })

  it("keeps a synopsis' continuation lines aligned under the spool words, and its own entry point's words apart", async () => {
    const r = await spool(["replay", "--help"])
    expect(r.stdout).toStartWith(
      "Usage: spool replay [--root DIR] [--source URL | --to inbox] [--] FILE\n       spool replay [--root DIR] [--dry-run] [--max-replays N] [--include-unchanged]\n                    (FILE... |",
    )
    const own = await run(["bun", join(repoRoot, "packages/ops/bin/replay.ts"), "--help"])
    expect(own.stdout).toStartWith("Usage: replay.sh [--root DIR] [--source URL | --to inbox] [--] FILE\n")
  })

  it("hints at spool COMMAND --help in a usage error of a command it runs", async () => {
    const r = await spool(["stats", "--bogus"])
    expect(r.stderr).toBe("stats: unknown option --bogus; run spool stats --help for the options\n")
    expect(r.exitCode).toBe(2)
  })

  it("names its own commands in the fixes a command's errors suggest, which run from any directory", async () => {
    await using dir = await tempDir()
    const r = await spool(["consume", "--root", join(dir.path, "q")])
    expect(r.stderr).toBe(
      `consume: ${join(dir.path, "q")} is not a spool queue: inbox/ is missing; create it with: spool setup --root ${join(dir.path, "q")}\n`,
    )
    expect(r.exitCode).toBe(2)
    // Run from the checkout's scripts, the same error names the script.
    const own = await run(["bun", join(repoRoot, "packages/consumer/bin/consume.ts"), "--root", join(dir.path, "q")])
    expect(own.stderr).toContain("create it with: bun run setup --root")
  })

  it.each([
    ["an unknown command", ["stat"], "spool: unknown command stat (did you mean stats?); the commands are:\n"],
    ["no command", [], "spool: give a command; the commands are:\n"],
    ["help for an unknown command", ["help", "bogus"], "spool: unknown command bogus; the commands are:\n"],
    ["a name every object has", ["constructor"], "spool: unknown command constructor; the commands are:\n"],
  ])("exits 2 with the list of commands for %s", async (_case, args, first) => {
    const r = await spool(args)
    expect(r.stdout).toBe("")
    expect(r.stderr).toStartWith(first)
    for (const [name] of specs) expect(r.stderr).toMatch(new RegExp(`\\n {2}${name} `))
    expect(r.exitCode).toBe(2)
  })

  it("exits 2 for an option before the command, saying options come after it", async () => {
    const r = await spool(["--root", "q", "stats"])
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(
      "spool: unknown option --root: spool takes a command first, then its options (spool COMMAND [OPTIONS]); run spool --help for the commands\n",
    )
    expect(r.exitCode).toBe(2)
  })

  it("runs each tool as its own entry point does: setup, consume, stats, lag, replay", async () => {
    await using q = await tempQueue()
    const setup = await spool(["setup", "--root", q.root, "--from", fixturesDir])
    expect(setup.stderr).toContain("copied 20 message(s)")
    expect(setup.exitCode).toBe(0)
    expect((await spool(["lag", q.root, "19"])).stdout).toBe("inbox=20 processing=0 error=0\n")
    expect((await spool(["lag", q.root, "19"])).exitCode).toBe(1)
    const consume = await spool(["consume", "--root", q.root, "-q"])
    expect(consume.exitCode).toBe(0)
    expect(list(join(q.root, "error"))).toEqual(["evt-broken-0001.json", "evt-noorder-0002.json"])
    const stats = JSON.parse((await spool(["stats", "--root", q.root, "--json"])).stdout)
    expect(stats.allTime).toMatchObject({ processed: 15, duplicates: 3 })
    // Corrected in error/ first, as an operator would: the bytes that failed would only fail again.
    fs.appendFileSync(join(q.root, "error", "evt-broken-0001.json"), "\n")
    const replay = await spool(["replay", "--root", q.root, "evt-broken-0001.json"])
    expect(replay.stderr).toContain("moved error/evt-broken-0001.json back to inbox/evt-broken-0001.json")
    expect(replay.exitCode).toBe(0)
    const orderCheck = await spool(["order-check", "--root", q.root])
    expect(orderCheck.stdout).toBe("OK\n")
    expect(orderCheck.exitCode).toBe(0)
  })

  it("passes a -- on to the command, for a name that starts with -", async () => {
    await using q = await tempQueue({ seed: { "-1.json": "{not json" } })
    expect((await spool(["consume", "--root", q.root, "-q"])).exitCode).toBe(0)
    expect(list(join(q.root, "error"))).toEqual(["-1.json"])
    fs.writeFileSync(join(q.root, "error", "-1.json"), "{}")
    const r = await spool(["replay", "--root", q.root, "--", "-1.json"])
    expect(r.stderr).toContain("moved error/-1.json back to inbox/-1.json")
    expect(r.exitCode).toBe(0)
    expect(list(join(q.root, "inbox"))).toEqual(["-1.json"])
  })
})

/** What each command needs besides the option under test to get as far as parsing it. */
const required: Record<string, string[][]> = { lag: [["Q"], ["1"]], compact: [["--older-than", "90d"]] }

const durationOptions = specs.flatMap(([name, spec]) =>
  Object.entries(spec.options as Options)
    .filter(([, o]) => o.kind === "duration")
    .map(([option, o]) => [name, option, o as ValueOption] as const),
)

const isPluginOption = (name: string, option: string) =>
  name === "lag" && (option === "warning-age" || option === "critical-age")

describe("every duration option of every command", () => {
  it("is found: compact's, consume's, stats', lag's, delete's and serve's", () => {
    expect(durationOptions.map(([n, o]) => `${n} --${o}`)).toEqual([
      "consume --min-age",
      "consume --defer-first",
      "consume --defer-max",
      "consume --defer-max-age",
      "consume --busy-timeout",
      "consume --idle-wait",
      "consume --rescan",
      "consume --batch-window",
      "compact --older-than",
      "compact --horizon",
      "stats --window",
      "lag --max-age",
      "lag --stalled-after",
      "lag --warning-age",
      "lag --critical-age",
      "delete --older-than",
      "serve --window",
      "serve --stalled-after",
    ])
  })

  it.each(durationOptions)("%s --%s refuses a bare number as a usage error, changing nothing", async (name, option) => {
    await using q = await tempQueue({ seed: { "a.json": { msg_id: "a", order_no: "o", seq: 1, amount: 1 } } })
    const args = (required[name] ?? [])
      .filter(([a]) => a !== `--${option}`)
      .flat()
      .map((a) => (a === "Q" ? q.root : a))
    const root = name === "lag" ? [] : ["--root", q.root]
    const r = await spool([name, ...root, ...args, `--${option}`, "90"])
    const problem = `--${option} takes a duration with a unit \\(ms, s, m, h, d\\), such as \\w+; "90" has none`
    if (isPluginOption(name, option)) {
      // lag's plugin options make it a Nagios plugin, which reports a bad argument as UNKNOWN on stdout.
      expect(r.stdout).toMatch(new RegExp(`^SPOOL UNKNOWN - ${problem}\\n$`))
      expect(r.stderr).toBe("")
      expect(r.exitCode).toBe(3)
    } else {
      expect(r.stdout).toBe("")
      expect(r.stderr).toMatch(new RegExp(`^${name}: ${problem}\\n$`))
      expect(r.exitCode).toBe(2)
    }
    expect(list(q.root)).toEqual(["deferred", "done", "error", "inbox", "processing", "tmp"])
    expect(list(join(q.root, "inbox"))).toEqual(["a.json"])
  })
})

describe("every command's --help", () => {
  it.each(specs)("spool %s --help ends with two or three examples, each a line the command takes", async (name, s) => {
    const r = await spool([name, "--help"])
    expect(r.exitCode).toBe(0)
    const examples = r.stdout.slice(r.stdout.lastIndexOf("\nExamples:\n"))
    const lines = examples.split("\n").filter((l) => l.startsWith(`  spool ${name} `))
    expect(lines.length).toBeGreaterThanOrEqual(2)
    expect(lines.length).toBeLessThanOrEqual(3)
    expect(r.stdout).toEndWith(`${lines.at(-1)}\n      ${s.examples.at(-1)?.does}\n`)
    // Each example's arguments, up to any shell redirection, are a line the command parses.
    for (const e of s.examples) {
      const args = e.args.split(" ").filter(Boolean)
      const end = args.findIndex((a) => ["<", ">", "|", "||"].includes(a))
      const parsed = await captured(() => runCommand(s, end < 0 ? args : args.slice(0, end), () => 0))
      expect({ example: e.args, stderr: parsed.stderr, code: parsed.code }).toEqual({
        example: e.args,
        stderr: "",
        code: 0,
      })
      // Parsing takes any URL; opening the source would refuse one its adapter cannot read.
      const url = args[args.indexOf("--source") + 1]
      if (args.includes("--source") && url !== undefined) {
        const parse = sourceParsers[url.split(":")[0] ?? ""]
        expect(parse, `${e.args}: no source takes this scheme`).toBeDefined()
        expect(() => parse?.(url), e.args).not.toThrow()
      }
    }
  })

  it.each(specs)(
    "spool %s --help lists every exit code it can return, 4 only where a signal interrupts it",
    async (name, s) => {
      const r = await spool([name, "--help"])
      expect(r.stdout).toContain(`\n\n${exitCodesLine(s.exitCodes)}\n\n`)
      expect((s.exitCodes as readonly number[]).includes(4)).toBe(name === "consume" || name === "compact")
      expect((s.exitCodes as readonly number[]).includes(1)).toBe(
        !["setup", "consume", "schema", "compact", "list", "completion", "man"].includes(name),
      )
    },
  )
})
