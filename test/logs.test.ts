import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { spool, tempQueue } from "@spool/test-support"

const lines = (stderr: string) => stderr.split("\n").filter(Boolean)

describe("consume's logs", () => {
  it("writes one parseable JSON object per line with --log-format json, with claims at -v", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    const r = await spool("consume", ["--root", q.root, "--log-format", "json", "-v"])
    expect(r.stdout).toBe("")
    expect(r.exitCode).toBe(0)
    const records = lines(r.stderr).map((l) => JSON.parse(l))
    for (const rec of records) {
      expect(Number.isNaN(Date.parse(rec.time))).toBe(false)
      expect(["debug", "info", "notice", "warn"]).toContain(rec.level)
      expect(typeof rec.event).toBe("string")
    }
    const of = (event: string) => records.filter((x) => x.event === event)
    expect(of("claimed")).toHaveLength(20)
    expect(of("claimed").every((x) => x.level === "debug" && x.file.endsWith(".json") && x.claim_id)).toBe(true)
    expect(
      of("duplicate")
        .map((x) => x.msg_id)
        .sort(),
    ).toEqual(["m-1001-02", "m-1002-02", "m-1004-01"])
    expect(of("duplicate").every((x) => x.level === "debug")).toBe(true)
    expect(of("rejected").every((x) => x.level === "warn")).toBe(true)
    expect(of("rejected").map((x) => [x.file, x.reason])).toEqual(
      expect.arrayContaining([
        ["evt-broken-0001.json", "parse"],
        ["evt-noorder-0002.json", "missing-field"],
      ]),
    )
    expect(of("rejected").every((x) => typeof x.detail === "string" && x.detail.length > 0)).toBe(true)
    expect(of("done")).toEqual([
      expect.objectContaining({
        level: "notice",
        files: 20,
        processed: 15,
        duplicates: 3,
        rejected: 2,
        conflicts: 0,
        recovered: 0,
      }),
    ])
  })

  it("writes text by default: rejections as warnings with reasons, duplicates only counted, no claims", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    const r = await spool("consume", ["--root", q.root])
    expect(r.exitCode).toBe(0)
    const text = lines(r.stderr)
    expect(text.filter((l) => l.includes("duplicate "))).toHaveLength(0)
    expect(text).toContainEqual(
      expect.stringMatching(/^spool: warn: rejected file=evt-broken-0001\.json reason=parse detail=/),
    )
    expect(text.some((l) => l.includes("claimed"))).toBe(false)
    expect(text.at(-1)).toMatch(/^spool: done files=20 processed=15 duplicates=3 /)
  })

  it("keeps with -q the rejections and the one-line summary, and nothing else", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    const r = await spool("consume", ["--root", q.root, "-q"])
    expect(r.exitCode).toBe(0)
    const text = lines(r.stderr)
    expect(text.filter((l) => l.startsWith("spool: warn: rejected "))).toHaveLength(2)
    expect(text).toHaveLength(3)
    expect(text.at(-1)).toMatch(/^spool: done files=20 processed=15 duplicates=3 conflicts=0 rejected=2 /)
    // A run with nothing to look at says its summary and nothing more.
    const again = await spool("consume", ["--root", q.root, "-q"])
    expect(lines(again.stderr)).toEqual([expect.stringMatching(/^spool: done files=0 processed=0 /)])
  })

  it("still warns with -q about recoveries and conflicts", async () => {
    await using q = await tempQueue({
      seed: { "a.json": { msg_id: "m-1", order_no: "O", seq: 1, amount: 1 } },
    })
    expect((await spool("consume", ["--root", q.root, "-q"])).exitCode).toBe(0)
    q.put("b.json", { msg_id: "m-1", order_no: "O", seq: 1, amount: 2 })
    fs.writeFileSync(
      join(q.root, "processing", "orphan.json"),
      JSON.stringify({ msg_id: "m-2", order_no: "O", seq: 2, amount: 1 }),
    )
    const r = await spool("consume", ["--root", q.root, "-q", "--log-format", "json"])
    expect(r.exitCode).toBe(0)
    const records = lines(r.stderr).map((l) => JSON.parse(l))
    expect(records.map((x) => [x.level, x.event, x.file])).toEqual(
      expect.arrayContaining([
        ["warn", "recovered", "orphan.json"],
        ["warn", "conflict", "b.json"],
      ]),
    )
    expect(records.every((x) => x.level === "warn" || (x.level === "notice" && x.event === "done"))).toBe(true)
  })

  it("refuses an unknown log format with exit 2", async () => {
    await using q = await tempQueue()
    const r = await spool("consume", ["--root", q.root, "--log-format", "xml"])
    expect(r.stderr).toContain("--log-format takes text or json")
    expect(r.exitCode).toBe(2)
  })
})
