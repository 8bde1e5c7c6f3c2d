import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { ledgerBackends, spool, tempQueue } from "@spool/test-support"

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
      expect(typeof rec.msg).toBe("string")
    }
    const of = (msg: string) => records.filter((x) => x.msg === msg)
    expect(of("claimed")).toHaveLength(20)
    expect(of("claimed").every((x) => x.level === "debug" && x.file.endsWith(".json") && x.claim_id)).toBe(true)
    expect(
      of("duplicate")
        .map((x) => x.msg_id)
        .sort(),
    ).toEqual(["m-1001-02", "m-1002-02", "m-1004-01"])
    expect(of("duplicate").every((x) => x.level === "debug")).toBe(true)
    expect(of("rejected").every((x) => x.level === "info")).toBe(true)
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
        reasons: { "missing-field": 1, parse: 1 },
      }),
    ])
  })

  it("writes logfmt by default: time, level and msg on every line, rejections with their reasons, no claims", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    const r = await spool("consume", ["--root", q.root])
    expect(r.exitCode).toBe(0)
    const text = lines(r.stderr)
    expect(text.filter((l) => l.includes("duplicate "))).toHaveLength(0)
    expect(text).toContainEqual(
      expect.stringMatching(/^time=\S+ level=info msg=rejected file=evt-broken-0001\.json reason=parse detail="[^"]/),
    )
    expect(text).toContainEqual(
      expect.stringMatching(
        / msg=rejected file=evt-noorder-0002\.json reason=missing-field detail="missing order_no"$/,
      ),
    )
    expect(text.some((l) => l.includes("claimed"))).toBe(false)
    expect(text.at(-1)).toMatch(
      /^time=\S+ level=notice msg=done files=20 processed=15 duplicates=3 conflicts=0 rejected=2 reasons\.missing-field=1 reasons\.parse=1 /,
    )
    for (const line of text)
      expect(line).toMatch(/^time=\d{4}-\d\d-\d\dT[\d:.]+Z level=(debug|info|notice|warn) msg=\S/)
  })

  it("prints nothing with -q on success: rejections are expected outcomes, counted in error.csv", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    for (const format of ["text", "json"]) {
      const r = await spool("consume", ["--root", q.root, "-q", "--log-format", format])
      expect(r.stdout).toBe("")
      expect(r.stderr).toBe("")
      expect(r.exitCode).toBe(0)
    }
    expect(fs.readdirSync(join(q.root, "error")).sort()).toEqual(["evt-broken-0001.json", "evt-noorder-0002.json"])
    expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toContain("evt-broken-0001.json")
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
    expect(records.map((x) => [x.level, x.msg, x.file])).toEqual(
      expect.arrayContaining([
        ["warn", "recovered", "orphan.json"],
        ["warn", "conflict", "b.json"],
      ]),
    )
    expect(records.every((x) => x.level === "warn")).toBe(true)
  })

  it("refuses an unknown log format with exit 2", async () => {
    await using q = await tempQueue()
    const r = await spool("consume", ["--root", q.root, "--log-format", "xml"])
    expect(r.stderr).toContain("--log-format takes text or json")
    expect(r.exitCode).toBe(2)
  })
})

for (const backend of await ledgerBackends())
  (backend.skip ? describe.skip : describe)(`consume -q on ${backend.name}`, () => {
    it("prints nothing for a run with rejections and duplicates, and still says a conflict", async () => {
      const m = (amount: number) => ({ msg_id: "m-1", order_no: "O", seq: 1, amount })
      await using q = await backend.queue({ seed: { "a.json": m(1), "b.json": m(1), "bad.json": "{not json" } })
      const quiet = await q.command("consume", ["-q"])
      expect({ stdout: quiet.stdout, stderr: quiet.stderr, code: quiet.exitCode }).toEqual({
        stdout: "",
        stderr: "",
        code: 0,
      })
      expect(fs.readdirSync(join(q.root, "error"))).toEqual(["bad.json"])
      q.put("c.json", m(2))
      const conflict = await q.command("consume", ["-q"])
      expect(conflict.stderr).toMatch(/^time=\S+ level=warn msg=conflict file=c\.json msg_id=m-1\n$/)
      expect(conflict.exitCode).toBe(0)
    })
  })
