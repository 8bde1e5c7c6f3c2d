import { describe, expect, it } from "bun:test"
import { SpoolError } from "@spool/core/engine"
import { parseBytes, parseDuration, parseInteger } from "./value.ts"

describe("parseDuration", () => {
  it.each([
    ["500ms", 500],
    ["30s", 30_000],
    ["1.5s", 1_500],
    ["5m", 300_000],
    ["2h", 7_200_000],
    ["90d", 7_776_000_000],
    ["0s", 0],
  ])("reads %s as %d ms", (text, ms) => {
    expect(parseDuration(text, "--x")).toBe(ms)
  })

  it("refuses a duration past 100 years, which no date could be written for", () => {
    expect(parseDuration("36500d", "--x")).toBe(36_500 * 86_400_000)
    for (const text of ["36501d", "999999999d", "1e400d".replace("e400", "0".repeat(400))])
      expect(() => parseDuration(text, "--older-than")).toThrow(
        `--older-than takes a duration of at most 36500d (100 years), not ${JSON.stringify(text)}`,
      )
  })

  it("refuses with a usage error: exit 2", () => {
    expect(() => parseDuration("90", "--older-than")).toThrow(SpoolError)
    try {
      parseDuration("90", "--older-than")
    } catch (error) {
      expect((error as SpoolError).code).toBe("usage")
    }
  })

  it.each(["90", "0", "1.5", "365"])("refuses the bare number %s, naming the units", (text) => {
    expect(() => parseDuration(text, "--older-than", "90d")).toThrow(
      new Error(
        `--older-than takes a duration with a unit (ms, s, m, h, d), such as 90d; ${JSON.stringify(text)} has none`,
      ),
    )
  })

  it.each(["soon", "", "5 m", "5M", "-5s", "1e3s", "5sec", "s"])("refuses %p", (text) => {
    expect(() => parseDuration(text, "--rescan")).toThrow(
      new Error(`--rescan takes a duration with a unit (ms, s, m, h, d), such as 30s, not ${JSON.stringify(text)}`),
    )
  })
})

describe("parseBytes", () => {
  it.each([
    ["1048576", 1_048_576],
    ["512k", 524_288],
    ["1m", 1_048_576],
    ["1MiB", 1_048_576],
    ["2g", 2 * 1024 ** 3],
  ])("reads %s as %d bytes", (text, n) => {
    expect(parseBytes(text, "--max-bytes")).toBe(n)
  })

  it.each(["lots", "", "1.5m", "-1"])("refuses %p", (text) => {
    expect(() => parseBytes(text, "--max-bytes")).toThrow("--max-bytes takes a size")
  })
})

describe("parseInteger", () => {
  it.each([
    ["0", 0, 0],
    ["3", 1, 3],
  ])("reads %s (at least %d) as %d", (text, min, n) => {
    expect(parseInteger(text, "--n", min)).toBe(n)
  })

  it.each([
    ["0", 1],
    ["1.5", 0],
    ["-1", 0],
    ["x", 0],
    ["99999999999999999999", 0],
  ])("refuses %s when at least %d is asked", (text, min) => {
    expect(() => parseInteger(text, "--n", min)).toThrow(
      new Error(`--n takes a whole number >= ${min}, not ${JSON.stringify(text)}`),
    )
  })
})
