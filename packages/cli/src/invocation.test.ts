import { describe, expect, it } from "bun:test"
import { usageAs } from "./invocation.ts"

describe("usageAs", () => {
  it("spells every program of the synopsis as the dispatcher's words", () => {
    expect(
      usageAs("bun run enqueue [--root DIR] FILE...   |   bun run enqueue --name NAME -", "enqueue", "spool enqueue"),
    ).toBe("spool enqueue [--root DIR] FILE...   |   spool enqueue --name NAME -")
    expect(usageAs("lag.sh DIR THRESHOLD\n       lag.sh DIR [--warning N]", "lag", "spool lag")).toBe(
      "spool lag DIR THRESHOLD\n       spool lag DIR [--warning N]",
    )
  })

  it("shifts continuation lines by what the program words gained or lost", () => {
    const usage = "replay.sh [--force]\n          (FILE... | --all)"
    expect(usageAs(usage, "replay", "spool replay")).toBe("spool replay [--force]\n             (FILE... | --all)")
    expect(usageAs("bun run show X\n            Y", "show", "sp show")).toBe("sp show X\n       Y")
  })

  it("leaves other words alone: another command's name, the name inside a word", () => {
    expect(usageAs("bun run stats [--root DIR] (see bun run list)", "list", "spool list")).toBe(
      "bun run stats [--root DIR] (see bun run list)",
    )
    expect(usageAs("bun run listing X", "list", "spool list")).toBe("bun run listing X")
  })
})
