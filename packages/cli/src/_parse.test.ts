import { describe, expect, it } from "bun:test"
import { ArgvProblem, readArgv } from "./_parse.ts"
import { duration, flag, integer, text } from "./option.ts"
import { help, root, version } from "./options.ts"
import { suggestion } from "./suggest.ts"

const options = {
  root,
  window: duration("window"),
  "max-replays": integer("replays"),
  match: text("GLOB", "glob", { multiple: true }),
  json: flag("json"),
  quiet: flag("quiet", { short: "q" }),
  help,
  version,
}

function problem(argv: string[], argumentName?: string): string {
  try {
    readArgv(options, argv, argumentName)
  } catch (error) {
    if (error instanceof ArgvProblem) return error.message
    throw error
  }
  throw new Error(`no problem found in ${JSON.stringify(argv)}`)
}

describe("readArgv", () => {
  it("reads options, repeated ones, short groups, inline values and positionals", () => {
    expect(
      readArgv(options, ["--root=q", "-q", "--match", "a*", "--match=-b*", "--window", "5m", "x", "--", "--json"]),
    ).toEqual({
      values: { root: "q", quiet: true, match: ["a*", "-b*"], window: "5m" },
      positionals: ["x", "--json"],
    })
  })

  it("takes a negative number standing alone as a positional argument, for the command to judge", () => {
    expect(readArgv(options, ["Q", "-1"]).positionals).toEqual(["Q", "-1"])
    expect(readArgv(options, ["-1.5", "--json"])).toEqual({ values: { json: true }, positionals: ["-1.5"] })
  })

  it.each([
    [["--bogus"], "unknown option --bogus"],
    [["--roots", "q"], "unknown option --roots (did you mean --root?)"],
    [["--jsno"], "unknown option --jsno (did you mean --json?)"],
    [["-x"], "unknown option -x"],
    [["-qz"], "unknown option -z in -qz"],
    [["-zq"], "unknown option -zq"],
    [["--a b"], "unknown option '--a b'"],
    [["--constructor"], "unknown option --constructor"],
    [["--__proto__=x"], "unknown option --__proto__"],
    [["--root"], "--root needs a value (DIR)"],
    [["--root", "--json"], "--root needs a value (DIR) before --json"],
    [["--window", "-5"], "--window takes DURATION, not the negative number -5"],
    [["--max-replays", "-1"], "--max-replays takes N, not the negative number -1"],
    [["--window", "-5m"], "--window takes DURATION, not the negative value -5m"],
    [["--match", "-x*"], "--match needs a value (GLOB); to give one that starts with -, write '--match=-x*'"],
    [["--json=yes"], "--json is a flag and takes no value: write --json, not '--json=yes'"],
  ])("explains %p in one line: %s", (argv, message) => {
    expect(problem(argv)).toBe(message)
  })

  it("says how to pass an argument that starts with - to a command that takes one", () => {
    expect(problem(["-1.json"], "FILE")).toBe("unknown option -1.json; put -- before a FILE that starts with -")
    expect(readArgv(options, ["--", "-1.json"]).positionals).toEqual(["-1.json"])
  })

  it("lets --help and --version through a line it would refuse", () => {
    expect(readArgv(options, ["--bogus", "--help"]).values.help).toBe(true)
    expect(problem(["--root", "--version"])).toBe("--root needs a value (DIR) before --version")
    expect(readArgv(options, ["-V", "--window"]).values.version).toBe(true)
  })

  it("takes no letter of a group with one no option has: a name that starts with -h asks for no help", () => {
    expect(problem(["-hourly.json"], "FILE")).toBe(
      "unknown option -o in -hourly.json; put -- before a FILE that starts with -",
    )
    expect(problem(["-qVx.json"], "FILE")).toContain("unknown option -x in -qVx.json")
    expect(readArgv(options, ["-qh"]).values).toEqual({ quiet: true, help: true })
  })
})

describe("suggestion", () => {
  it.each([
    ["frm", ["from", "root"], "from"],
    ["dryrun", ["dry-run", "delete"], "dry-run"],
    ["bogus", ["root", "ledger", "json"], undefined],
    ["js", ["json"], undefined],
  ])("suggests for %s among %p: %p", (word, candidates, expected) => {
    expect(suggestion(word, candidates)).toBe(expected)
  })
})
