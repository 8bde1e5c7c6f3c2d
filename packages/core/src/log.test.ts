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

describe("createLog", () => {
  it.each([
    ["quiet", ["conflict"]],
    ["info", ["duplicate", "conflict"]],
    ["verbose", ["claimed", "duplicate", "conflict"]],
  ] as const)("at level %s writes exactly the events it should", (level, events) => {
    const { log, lines } = capture(level, "json")
    emitAll(log)
    expect(lines.map((l) => JSON.parse(l).event)).toEqual([...events])
  })

  it("writes JSON lines that parse and carry time, level, event and the fields", () => {
    const { log, lines } = capture("verbose", "json")
    log.info("rejected", { file: "x y.json", reason: "parse", detail: 'bad "json"\n', attempts: 2 })
    expect(lines).toHaveLength(1)
    expect(lines[0]?.endsWith("\n")).toBe(true)
    const record = JSON.parse(lines[0] as string)
    expect(record).toMatchObject({
      level: "info",
      event: "rejected",
      file: "x y.json",
      reason: "parse",
      detail: 'bad "json"\n',
      attempts: 2,
    })
    expect(Number.isNaN(Date.parse(record.time))).toBe(false)
    expect(Object.keys(record).slice(0, 3)).toEqual(["time", "level", "event"])
  })

  it("keeps one line per record even when a field holds a newline", () => {
    const { log, lines } = capture("info", "text")
    log.info("rejected", { file: "evil\nspool: warn: fake.json", reason: "parse" })
    expect(lines).toHaveLength(1)
    expect(lines[0]?.split("\n")).toHaveLength(2)
    expect(lines[0]).toBe("spool: rejected file='evil'$'\\n''spool: warn: fake.json' reason=parse\n")
  })

  it("does not let a field named event or level replace the real ones", () => {
    const { log, lines } = capture("info", "json")
    log.warn("conflict", { event: "forged", level: "info", file: "a.json" })
    expect(JSON.parse(lines[0] as string)).toMatchObject({ event: "conflict", level: "warn", file: "a.json" })
  })

  it.each([
    ["a bare word unquoted", { file: "a.json" }, "spool: warn: recovered file=a.json\n"],
    [
      "a space quoted, numbers and booleans bare",
      { file: "a b.json", n: 3, ok: true },
      "spool: warn: recovered file='a b.json' n=3 ok=true\n",
    ],
    [
      "an empty string quoted, undefined left out, null bare",
      { file: "", x: undefined, y: null },
      "spool: warn: recovered file='' y=null\n",
    ],
    ["an object as JSON", { dest: { to: "done" } }, 'spool: warn: recovered dest={"to":"done"}\n'],
    ["an equals sign quoted", { k: "a=b" }, "spool: warn: recovered k='a=b'\n"],
    ["a double quote single-quoted", { k: 'say "x"' }, "spool: warn: recovered k='say \"x\"'\n"],
  ])("formats text fields: %s", (_label, fields, expected) => {
    const { log, lines } = capture("info", "text")
    log.warn("recovered", fields)
    expect(lines).toEqual([expected])
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
    expect(lines).toEqual(["spool: drained files=3 worker=2\n"])
  })

  it("colours the level only when asked to", () => {
    const plain = capture("info", "text", false)
    const coloured = capture("info", "text", true)
    plain.log.warn("conflict")
    coloured.log.warn("conflict")
    expect(plain.lines[0]).toBe("spool: warn: conflict\n")
    expect(coloured.lines[0]).toContain("\x1b[33mwarn\x1b[39m")
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
