import { describe, expect, it } from "bun:test"
import { SpoolError } from "@spool/core/engine"
import { captured } from "@spool/test-support"
import { type CommandSpec, type Parsed, runCommand } from "./command.ts"
import { helpText } from "./help.ts"
import { bytes, choice, duration, flag, integer, type Options, text } from "./option.ts"
import { ledger, root } from "./options.ts"

const spec = {
  name: "demo",
  usage: "demo [--root DIR] [options] FILE...",
  summary: "Does what a test asks.",
  arguments: [{ name: "FILE...", help: "files" }],
  options: {
    root,
    ledger,
    json: flag("one JSON object"),
    window: duration("the window", { default: "24h", min: 1 }),
    "max-age": duration("an age"),
    batch: integer("per batch", { default: "10", min: 1 }),
    size: bytes("a size", { default: "1m" }),
    format: choice("FORMAT", ["line", "json", "prometheus"], "a format"),
    match: text("GLOB", "a glob", { multiple: true }),
    quiet: flag("quiet", { short: "q" }),
  },
  exitCodes: [0, 1, 2, 3],
  examples: [
    { args: "a.json", does: "does it to one file" },
    { args: "--json a.json b.json", does: "does it to two, in JSON" },
  ],
} satisfies CommandSpec

/** Runs the demo command, returning what its body was given (or undefined when it did not run). */
async function parse<O extends Options = typeof spec.options>(argv: string[], s: CommandSpec<O> = spec as never) {
  let seen: Parsed<O> | undefined
  const r = await captured(() =>
    runCommand(s, argv, (args) => {
      seen = args
      return 0
    }),
  )
  return { ...r, seen }
}

describe("runCommand", () => {
  it("gives the body every option parsed by its kind, defaults applied", async () => {
    const r = await parse(["--root", "q", "--json", "-q", "--max-age", "5m", "--match", "a*", "--match", "b*", "x"])
    expect(r.stderr).toBe("")
    expect(r.seen?.values).toEqual({
      root: "q",
      ledger: undefined,
      json: true,
      quiet: true,
      window: 86_400_000,
      "max-age": 300_000,
      batch: 10,
      size: 1024 * 1024,
      format: undefined,
      match: ["a*", "b*"],
    })
    expect(r.seen?.texts).toEqual({ root: "q", window: "24h", "max-age": "5m", batch: "10", size: "1m" })
    expect(r.seen?.positionals).toEqual(["x"])
  })

  it("leaves an absent option without a default undefined and an absent flag false", async () => {
    const r = await parse([])
    expect(r.seen?.values.root).toBeUndefined()
    expect(r.seen?.values.format).toBeUndefined()
    expect(r.seen?.values.json).toBe(false)
  })

  it.each([
    [["--window", "0s"], 'demo: --window must be longer than 0, not "0s"\n'],
    [["--batch", "0"], 'demo: --batch takes a whole number >= 1, not "0"\n'],
    [["--batch", "99999999999999999999"], 'demo: --batch takes a whole number >= 1, not "99999999999999999999"\n'],
    [["--size", "lots"], 'demo: --size takes a size such as 1048576, 512k or 1m, not "lots"\n'],
    [["--format", "xml"], 'demo: --format takes one of line, json, prometheus, not "xml"\n'],
  ])("refuses %p with exit 2 before the body runs", async (argv, message) => {
    const r = await parse(argv)
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(message)
    expect(r.code).toBe(2)
    expect(r.seen).toBeUndefined()
  })

  it("prints --help on stdout and exits 0 without running the body", async () => {
    const r = await parse(["--help"])
    expect(r.stdout).toBe(helpText(spec))
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    expect(r.seen).toBeUndefined()
  })

  it("refuses a positional argument when the command takes none", async () => {
    const r = await parse(["extra"], {
      name: "demo",
      usage: "demo",
      summary: "Takes no arguments.",
      options: { root },
      exitCodes: [0, 2],
      examples: [],
    })
    expect(r.stderr).toBe("demo: unexpected argument extra: demo takes no arguments; run demo --help for the options\n")
    expect(r.code).toBe(2)
  })

  it.each([
    ["an argument it does not take", ["--bogus"], 2],
    ["a value it does not take", ["--batch", "0"], 2],
  ] as const)("hands %s to onFailure, which decides what is written and the exit code", async (_c, argv, code) => {
    const seen: [string, number][] = []
    const r = await captured(() =>
      runCommand(spec, argv, () => 0, {
        onFailure: (message, c) => {
          seen.push([message, c])
          process.stdout.write(`FAILED ${message}\n`)
          return 3
        },
      }),
    )
    expect(r.stdout).toMatch(/^FAILED .*--(bogus|batch)/)
    expect(r.stderr).toBe("")
    expect(r.code).toBe(3)
    expect(seen.map(([, c]) => c)).toEqual([code])
  })

  it("hands a SpoolError of the body to onFailure with the code the README gives it", async () => {
    const r = await captured(() =>
      runCommand(
        spec,
        [],
        () => {
          throw new SpoolError("io", "cannot read /q/inbox")
        },
        { onFailure: (message, code) => (message === "cannot read /q/inbox" ? code + 10 : 0) },
      ),
    )
    expect(r.stderr).toBe("")
    expect(r.code).toBe(13)
  })
})

describe("helpText", () => {
  const help = helpText(spec)

  it("has one line per option, made from its spec, with its default, and --help and --version last", () => {
    const lines = help.split("\n")
    const options = lines.slice(lines.indexOf("Options:") + 1, lines.indexOf("", lines.indexOf("Options:")))
    const labels = options.map((l) => l.trim().split(/\s{2,}/)[0]).filter((l) => l !== "" && l?.startsWith("-"))
    expect(labels).toEqual([
      "--root DIR",
      "--ledger URL",
      "--json",
      "--window DURATION",
      "--max-age DURATION",
      "--batch N",
      "--size SIZE",
      "--format FORMAT",
      "--match GLOB",
      "-q, --quiet",
      "-h, --help",
      "-V, --version",
    ])
    expect(help).toMatch(/\n {2}--window DURATION +the window \(default: 24h\)\n/)
    expect(help).toMatch(
      /\n {2}--root DIR +queue root \(default: \$SPOOL_ROOT, else the enclosing queue root, else \.\/spool\)\n/,
    )
  })

  it("starts with the usage and the summary and lists the arguments", () => {
    expect(help).toStartWith("Usage: demo [--root DIR] [options] FILE...\n\nDoes what a test asks.\n\nArguments:\n")
    expect(help).toContain("  FILE...  files\n")
    expect(help).toContain(
      "\n\nExit codes: 0 ok, 1 check failed or refused (nothing changed), 2 usage or not a queue, 3 runtime failure, 128+n ended by signal n.\n\n",
    )
  })

  it("ends with the examples, each the program, its arguments and what it does", () => {
    expect(help).toEndWith(
      "\n\nExamples:\n  demo a.json\n      does it to one file\n  demo --json a.json b.json\n      does it to two, in JSON\n",
    )
    expect(helpText({ ...spec, usage: "bun run demo FILE..." })).toContain("\n  bun run demo a.json\n")
    expect(helpText(spec, "spool demo")).toContain("\n  spool demo a.json\n")
  })

  it("lists only the exit codes the command can return, 4 where it can be interrupted", () => {
    expect(helpText({ ...spec, exitCodes: [0, 2, 3, 4] })).toContain(
      "Exit codes: 0 ok, 2 usage or not a queue, 3 runtime failure, 4 interrupted by a signal (run again to go on), 128+n ended by signal n.",
    )
  })

  it("wraps a long help line under its own column", () => {
    const long = helpText({ ...spec, options: { x: flag(Array.from({ length: 40 }, () => "word").join(" ")) } })
    const lines = long.split("\n").filter((l) => l.includes("word"))
    expect(lines.length).toBeGreaterThan(1)
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(110)
    expect(lines[1]).toStartWith(`${" ".repeat(lines[0]?.indexOf("word") ?? 0)}word`)
  })
})
