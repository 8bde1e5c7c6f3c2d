import { describe, expect, it } from "bun:test"
import { createLog, isColorWanted, type LogLevel } from "./log.ts"

function capture(level: LogLevel, format: "text" | "json", color = false) {
  const lines: string[] = []
  const log = createLog(level, format, { write: (l) => lines.push(l), color })
  return { log, lines }
}

function emitAll(log: ReturnType<typeof createLog>) {
  log.debug("claimed", { file: "a.json" })
  log.info("duplicate", { file: "b.json", msg_id: "m-1" })
  log.warn("conflict", { file: "c.json", msg_id: "m-2" })
}

/** A text line without its time, which differs on every run. */
const untimed = (line: string | undefined) => line?.replace(/^time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z /, "")

describe("createLog", () => {
  it.each([
    ["quiet", ["conflict"]],
    ["info", ["duplicate", "conflict"]],
    ["verbose", ["claimed", "duplicate", "conflict"]],
  ] as const)("at level %s writes exactly the events it should", (level, events) => {
    const { log, lines } = capture(level, "json")
    emitAll(log)
    expect(lines.map((l) => JSON.parse(l).msg)).toEqual([...events])
  })

  it("writes JSON lines that parse and carry time, level, msg and the fields, an object kept an object", () => {
    const { log, lines } = capture("verbose", "json")
    log.info("rejected", { file: "x y.json", reason: "parse", detail: 'bad "json"\n', attempts: 2 })
    log.notice("done", { files: 2, reasons: { parse: 1, "missing-field": 1 } })
    expect(lines).toHaveLength(2)
    expect(lines[0]?.endsWith("\n")).toBe(true)
    const record = JSON.parse(lines[0] as string)
    expect(record).toMatchObject({
      level: "info",
      msg: "rejected",
      file: "x y.json",
      reason: "parse",
      detail: 'bad "json"\n',
      attempts: 2,
    })
    expect(Number.isNaN(Date.parse(record.time))).toBe(false)
    expect(Object.keys(record).slice(0, 3)).toEqual(["time", "level", "msg"])
    expect(JSON.parse(lines[1] as string).reasons).toEqual({ parse: 1, "missing-field": 1 })
  })

  it("starts every text line with its time, level and message, the level on every level", () => {
    const { log, lines } = capture("verbose", "text")
    emitAll(log)
    log.notice("done", { files: 3 })
    expect(lines.map((l) => l.split(" ").slice(1, 3).join(" "))).toEqual([
      "level=debug msg=claimed",
      "level=info msg=duplicate",
      "level=warn msg=conflict",
      "level=notice msg=done",
    ])
    for (const line of lines) {
      const time = /^time=(\S+) /.exec(line)?.[1] ?? ""
      expect(new Date(time).toISOString()).toBe(time)
    }
  })

  it("keeps one line per record even when a field holds a newline, and a value cannot forge a field", () => {
    const { log, lines } = capture("info", "text")
    log.info("rejected", { file: "evil\nlevel=warn msg=fake.json", reason: "parse" })
    expect(lines).toHaveLength(1)
    expect(lines[0]?.split("\n")).toHaveLength(2)
    expect(untimed(lines[0])).toBe('level=info msg=rejected file="evil\\nlevel=warn msg=fake.json" reason=parse\n')
  })

  it("does not let a field named msg, time or level replace the real ones", () => {
    const { log, lines } = capture("info", "json")
    log.warn("conflict", { msg: "forged", level: "info", time: "never", file: "a.json" })
    expect(JSON.parse(lines[0] as string)).toMatchObject({ msg: "conflict", level: "warn", file: "a.json" })
    expect(JSON.parse(lines[0] as string).time).not.toBe("never")
  })

  it.each([
    ["a bare word unquoted", { file: "a.json" }, "file=a.json"],
    ["a space quoted, numbers and booleans bare", { file: "a b.json", n: 3, ok: true }, 'file="a b.json" n=3 ok=true'],
    ["an empty string quoted, undefined left out, null bare", { file: "", x: undefined, y: null }, 'file="" y=null'],
    [
      "an object's fields as dotted keys",
      { reasons: { parse: 1, "missing-field": 2 } },
      "reasons.parse=1 reasons.missing-field=2",
    ],
    ["an array as quoted JSON", { ids: ["a", "b"] }, 'ids="[\\"a\\",\\"b\\"]"'],
    ["an equals sign quoted", { k: "a=b" }, 'k="a=b"'],
    ["a double quote escaped", { k: 'say "x"' }, 'k="say \\"x\\""'],
    ["a backslash bare, and escaped once quoted", { k: "C:\\x", j: "a \\b" }, 'k=C:\\x j="a \\\\b"'],
    ["a control character quoted and escaped", { k: "a\x1bb", t: "x\ty" }, 'k="a\\u001bb" t="x\\ty"'],
    ["an error as its message", { error: new Error("disk full") }, 'error="disk full"'],
    ["a bidi override and a no-break space escaped", { k: "a\u202eb", n: "1\u00a02" }, 'k="a\\u202eb" n="1\\u00a02"'],
  ])("formats text fields by logfmt's rules: %s", (_label, fields, expected) => {
    const { log, lines } = capture("info", "text")
    log.warn("recovered", fields)
    expect(lines.map(untimed)).toEqual([`level=warn msg=recovered ${expected}\n`])
  })

  it("omits undefined fields and turns bigints and errors into strings in JSON", () => {
    const { log, lines } = capture("info", "json")
    log.warn("failed", { a: undefined, n: 12n, error: new Error("disk full") })
    const record = JSON.parse(lines[0] as string)
    expect("a" in record).toBe(false)
    expect(record.n).toBe("12")
    expect(record.error).toBe("disk full")
  })

  it("adds the log's own fields to every line, after the line's fields", () => {
    const lines: string[] = []
    const log = createLog("info", "text", { write: (l) => lines.push(l), color: false, fields: { worker: 2 } })
    log.info("drained", { files: 3 })
    expect(lines.map(untimed)).toEqual(["level=info msg=drained files=3 worker=2\n"])
  })

  it("colours the level only when asked to", () => {
    const plain = capture("info", "text", false)
    const coloured = capture("info", "text", true)
    plain.log.warn("conflict")
    coloured.log.warn("conflict")
    expect(untimed(plain.lines[0])).toBe("level=warn msg=conflict\n")
    expect(coloured.lines[0]).toContain("level=\x1b[33mwarn\x1b[39m")
  })
})

describe("isColorWanted", () => {
  it.each([
    ["wants colour on a TTY", {}, true, true],
    ["wants none when stderr is not a TTY", {}, false, false],
    ["wants none when NO_COLOR is set", { NO_COLOR: "1" }, true, false],
    ["ignores an empty NO_COLOR", { NO_COLOR: "" }, true, true],
    ["wants none on a dumb terminal", { TERM: "dumb" }, true, false],
  ])("%s", (_label, env, isTTY, expected) => {
    expect(isColorWanted(env, isTTY)).toBe(expected)
  })
})
