import { describe, expect, it } from "bun:test"
import { createProgress, formatDuration, formatProgress } from "./progress.ts"

const frame = { label: "consume", done: 250, total: 1000, elapsedMs: 1000, width: 120, color: false }

describe("formatProgress", () => {
  it("shows the bar, the count, the percentage, the rate and the ETA", () => {
    expect(formatProgress(frame)).toBe(
      `consume [${"#".repeat(10)}${"-".repeat(30)}] 250/1000  25%  250 files/s  ETA 3s`,
    )
  })

  it.each([
    ["a narrow terminal", { width: 40 }],
    ["a wide one", { width: 200 }],
    ["a very narrow one", { width: 20 }],
  ])("never reaches the last column of %s", (_label, change) => {
    const f = { ...frame, ...change }
    expect(formatProgress(f).length).toBeLessThan(f.width)
  })

  it("says the ETA is unknown before anything is done", () => {
    expect(formatProgress({ ...frame, done: 0, elapsedMs: 0 })).toEndWith("0/1000   0%  0.0 files/s  ETA --")
  })

  it("is full at the end", () => {
    expect(formatProgress({ ...frame, done: 1000 })).toContain(`[${"#".repeat(40)}] 1000/1000 100%`)
  })

  it("uses colour only when asked", () => {
    expect(formatProgress(frame)).not.toContain("\x1b")
    expect(formatProgress({ ...frame, color: true })).toContain("\x1b[32m")
  })
})

describe("formatDuration", () => {
  it.each([
    [0, "0s"],
    [1_200, "2s"],
    [59_000, "59s"],
    [65_000, "1m05s"],
    [3_600_000 + 7 * 60_000, "1h07m"],
  ])("formats %p ms as %p", (ms, text) => {
    expect(formatDuration(ms)).toBe(text)
  })
})

describe("createProgress", () => {
  function fakeTerminal() {
    let t = 0
    const out: string[] = []
    const progress = createProgress({
      total: 10,
      stream: { write: (s: string) => out.push(s), columns: 60 },
      color: false,
      intervalMs: 100,
      now: () => t,
    })
    return { progress, out, advance: (ms: number) => (t += ms) }
  }

  it("draws the first update at once and later ones at most every interval", () => {
    const { progress, out, advance } = fakeTerminal()
    progress.update(1)
    advance(50)
    progress.update(2)
    advance(60)
    progress.update(3)
    expect(out).toHaveLength(2)
    expect(out[0]).toStartWith("\rconsume [")
    expect(out[1]).toContain(" 3/10 ")
  })

  it("clears the bar before a log line and draws it again after", () => {
    const { progress, out } = fakeTerminal()
    progress.update(4)
    progress.write("time=2026-12-02T15:00:00.000Z level=warn msg=conflict file=a.json\n")
    expect(out[1]).toBe("\r\x1b[Ktime=2026-12-02T15:00:00.000Z level=warn msg=conflict file=a.json\n")
    expect(out[2]).toContain(" 4/10 ")
  })

  it("passes log lines straight through before the first draw and after finish", () => {
    const { progress, out } = fakeTerminal()
    progress.write("a\n")
    progress.update(1)
    progress.finish()
    progress.write("b\n")
    progress.update(2)
    expect(out).toEqual(["a\n", expect.stringContaining(" 1/10 "), "\r\x1b[K", "b\n"])
  })
})
