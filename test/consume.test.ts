// `bun run consume` on the sample and on hand-made queues: the numbers and files the docs give
// (the README's quick start, docs/operating.md).
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { list, type RunResult, snapshot, spool, tempQueue } from "@spool/test-support"

/** The summary line consume ends its stderr with; `seconds` is the only field that varies. */
function summaryLine(fields: string): RegExp {
  return new RegExp(
    `(^|\n)time=\\S+ level=notice msg=done ${fields.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} seconds=\\d+(\\.\\d+)?\n$`,
  )
}

function query<T>(root: string, sql: string): T[] {
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    return db.query(sql).all() as T[]
  } finally {
    db.close()
  }
}

/** Mounting a tmpfs needs root (or CAP_SYS_ADMIN); probed once so the test is skipped, not passed, without it. */
const canMountTmpfs = (() => {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-mount-probe-"))
  try {
    const r = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir], { stderr: "pipe" })
    if (r.exitCode !== 0) {
      console.warn(
        `SKIPPING the cross-filesystem consume test: cannot mount a tmpfs here (${r.stderr.toString().trim()}); run as root to cover it`,
      )
      return false
    }
    Bun.spawnSync(["umount", dir])
    return true
  } catch (error) {
    console.warn(`SKIPPING the cross-filesystem consume test: no mount command (${String(error)})`)
    return false
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})()

const sha256 = (path: string) => new Bun.CryptoHasher("sha256").update(fs.readFileSync(path)).digest("hex")

function expectOk(r: RunResult, summary: string): void {
  expect(r.stdout).toBe("")
  expect(r.stderr).toMatch(summaryLine(summary))
  expect(r.exitCode).toBe(0)
}

const msg = (msgId: string, orderNo: string, seq: number, amount = 1) => ({
  msg_id: msgId,
  order_no: orderNo,
  seq,
  amount,
})

describe("bun run consume on the sample", () => {
  it("ends with 18 in done/, 2 in error/, 15 processed, 3 duplicates, exact amounts and empty inbox/ and processing/", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    const inboxHashes = Object.fromEntries(
      list(join(q.root, "inbox")).map((n) => [n, sha256(join(q.root, "inbox", n))]),
    )
    const r = await spool("consume", ["--root", q.root])
    expectOk(
      r,
      "files=20 processed=15 duplicates=3 conflicts=0 rejected=2 reasons.missing-field=1 reasons.parse=1 recovered=0",
    )
    expect(list(join(q.root, "inbox"))).toEqual([])
    expect(list(join(q.root, "processing"))).toEqual([])
    expect(list(join(q.root, "error"))).toEqual(["evt-broken-0001.json", "evt-noorder-0002.json"])
    expect(list(join(q.root, "done"))).toHaveLength(18)
    // Every file arrived in exactly one place, with its bytes.
    const after = { ...snapshot(q.root).done, ...snapshot(q.root).error }
    expect(after).toEqual(inboxHashes)

    expect(query(q.root, "SELECT count(*) AS n FROM processed")).toEqual([{ n: 15 }])
    expect(fs.readFileSync(join(q.root, "dup.txt"), "utf8")).toBe("m-1001-02\nm-1002-02\nm-1004-01\n")
    expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe(
      "file,reason\nevt-broken-0001.json,parse\nevt-noorder-0002.json,missing-field\n",
    )
    expect(query(q.root, "SELECT file, reason, detail FROM failures ORDER BY file")).toEqual([
      { file: "evt-broken-0001.json", reason: "parse", detail: expect.any(String) },
      { file: "evt-noorder-0002.json", reason: "missing-field", detail: "missing order_no" },
    ])

    // amount is money: stored as the decimal written in the message, as text.
    const amounts = Object.fromEntries(
      query<{ msg_id: string; amount: string; t: string }>(
        q.root,
        "SELECT msg_id, amount, typeof(amount) AS t FROM processed",
      ).map((r) => [r.msg_id, [r.amount, r.t]]),
    )
    expect(amounts["m-1001-01"]).toEqual(["1137.25", "text"])
    expect(amounts["m-1001-02"]).toEqual(["0.1", "text"])
    expect(amounts["m-1001-04"]).toEqual(["250.00", "text"])
    expect(amounts["m-1005-01"]).toEqual(["64.50", "text"])
    expect(amounts["m-1003-02"]).toEqual(["80", "text"])
    expect(amounts["m-1002-02"]).toEqual(["0.01", "text"])

    // Each duplicate is recorded with the file that delivered it, not the one processed.
    const dups = query<{ msg_id: string; file: string; processed_file: string; is_conflict: number }>(
      q.root,
      `SELECT d.msg_id, d.file, p.file AS processed_file, d.is_conflict
       FROM duplicates d JOIN processed p USING (msg_id) ORDER BY d.msg_id`,
    )
    const pairs: Record<string, string[]> = {
      "m-1001-02": ["evt-f468ed87.json", "retry-2a6b7b85.json"],
      "m-1002-02": ["evt-762cbf63.json", "retry-b061cf38.json"],
      "m-1004-01": ["evt-6262f463.json", "retry-f6ea2824.json"],
    }
    expect(dups.map((d) => d.msg_id)).toEqual(Object.keys(pairs))
    for (const d of dups) {
      expect([d.file, d.processed_file].sort()).toEqual(pairs[d.msg_id] ?? [])
      expect(d.is_conflict).toBe(0)
    }
  })

  it("writes --stats-json after the run, and says so in one line where it cannot, exit 3", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    const file = join(q.path, "stats.json")
    const r = await spool("consume", ["--root", q.root, "-q", "--stats-json", file])
    expect(r.exitCode).toBe(0)
    expect(JSON.parse(fs.readFileSync(file, "utf8"))).toMatchObject({ processed: 15, duplicates: 3 })
    const nowhere = join(q.path, "no-such-dir", "stats.json")
    const bad = await spool("consume", ["--root", q.root, "-q", "--stats-json", nowhere])
    expect(bad.stderr).toBe(`consume: cannot write ${nowhere} (ENOENT); fix the cause, then run the command again\n`)
    expect(bad.exitCode).toBe(3)
  })

  it("changes nothing when run a second time", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    const first = snapshot(q.root)
    const r = await spool("consume", ["--root", q.root])
    expectOk(r, "files=0 processed=0 duplicates=0 conflicts=0 rejected=0 recovered=0")
    expect(snapshot(q.root)).toEqual(first)
  })
})

describe("bun run consume on hand-made messages", () => {
  it("rejects a wrongly typed field as invalid-field and keeps the detail in the ledger", async () => {
    await using q = await tempQueue({
      seed: {
        "ok.json": '{"msg_id": "m1", "order_no": "A", "seq": 1, "amount": 12345678901234567.89}',
        "seq-string.json": { ...msg("m2", "A", 2), seq: "2" },
        "amount-string.json": { ...msg("m3", "A", 3), amount: "1.50" },
        "empty-id.json": { ...msg("", "A", 4) },
        "array.json": "[1, 2]",
      },
    })
    const r = await spool("consume", ["--root", q.root])
    expectOk(
      r,
      "files=5 processed=1 duplicates=0 conflicts=0 rejected=4 reasons.invalid-field=3 reasons.parse=1 recovered=0",
    )
    expect(list(join(q.root, "done"))).toEqual(["ok.json"])
    // A float would round this to 12345678901234568; the ledger keeps what was written.
    expect(query(q.root, "SELECT msg_id, amount FROM processed")).toEqual([
      { msg_id: "m1", amount: "12345678901234567.89" },
    ])
    expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe(
      "file,reason\namount-string.json,invalid-field\narray.json,parse\nempty-id.json,invalid-field\nseq-string.json,invalid-field\n",
    )
    const detail = Object.fromEntries(
      query<{ file: string; detail: string }>(q.root, "SELECT file, detail FROM failures").map((f) => [
        f.file,
        f.detail,
      ]),
    )
    expect(detail["seq-string.json"]).toContain("seq")
    expect(detail["amount-string.json"]).toContain("amount")
    expect(detail["empty-id.json"]).toContain("msg_id")
    expect(detail["array.json"]).toContain("array")
  })

  it("quotes error.csv per RFC 4180 for names with commas, quotes and line breaks", async () => {
    await using q = await tempQueue({
      seed: { "a,b.json": "nope", 'say "hi".json': "nope", "line\nbreak.json": "nope", "plain.json": "nope" },
    })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe(
      'file,reason\n"a,b.json",parse\n"line\nbreak.json",parse\nplain.json,parse\n"say ""hi"".json",parse\n',
    )
  })

  it("keeps both files when done/ already holds the name: the new one becomes x~1.json", async () => {
    await using q = await tempQueue()
    // A name taken in done/ is history, which a queue has only with its ledger.
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    fs.writeFileSync(join(q.root, "done", "x.json"), "older bytes")
    q.put("x.json", msg("m1", "A", 1))
    const incoming = fs.readFileSync(join(q.root, "inbox", "x.json"), "utf8")
    const r = await spool("consume", ["--root", q.root])
    expectOk(r, "files=1 processed=1 duplicates=0 conflicts=0 rejected=0 recovered=0")
    expect(list(join(q.root, "done"))).toEqual(["x.json", "x~1.json"])
    expect(fs.readFileSync(join(q.root, "done", "x.json"), "utf8")).toBe("older bytes")
    expect(fs.readFileSync(join(q.root, "done", "x~1.json"), "utf8")).toBe(incoming)
    expect(list(join(q.root, "processing"))).toEqual([])
  })

  it("keeps both files when error/ already holds the name, and reports the new one under its new name", async () => {
    await using q = await tempQueue()
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    fs.writeFileSync(join(q.root, "error", "bad.json"), "older bytes")
    fs.writeFileSync(join(q.root, "error", "bad~1.json"), "older still")
    q.put("bad.json", "not json")
    const r = await spool("consume", ["--root", q.root])
    expectOk(r, "files=1 processed=0 duplicates=0 conflicts=0 rejected=1 reasons.parse=1 recovered=0")
    expect(list(join(q.root, "error"))).toEqual(["bad.json", "bad~1.json", "bad~2.json"])
    expect(fs.readFileSync(join(q.root, "error", "bad.json"), "utf8")).toBe("older bytes")
    expect(fs.readFileSync(join(q.root, "error", "bad~1.json"), "utf8")).toBe("older still")
    expect(fs.readFileSync(join(q.root, "error", "bad~2.json"), "utf8")).toBe("not json")
    expect(query(q.root, "SELECT file, original, reason FROM failures")).toEqual([
      { file: "bad~2.json", original: "bad.json", reason: "parse" },
    ])
    expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe(
      "file,reason\nbad.json,unknown\nbad~1.json,unknown\nbad~2.json,parse\n",
    )
  })
})

describe("bun run consume on orphans in processing/ (no claim row)", () => {
  /**
   * What each hostile entry is: hidden, not *.json, a directory named *.json, one written just
   * now, an old message. `place` puts them into a queue directory, all backdated but fresh.json.
   */
  function place(dir: string): void {
    const hourAgo = new Date(Date.now() - 3_600_000)
    for (const [name, content] of [
      [".hidden.json", msg("m-hidden", "H", 1)],
      ["x.json.part", msg("m-part", "P", 1)],
      ["notes.txt", "operator notes"],
      ["old.json", msg("m-old", "O", 1)],
      ["fresh.json", msg("m-fresh", "F", 1)],
    ] as const) {
      fs.writeFileSync(join(dir, name), typeof content === "string" ? content : JSON.stringify(content))
      if (name !== "fresh.json") fs.utimesSync(join(dir, name), hourAgo, hourAgo)
    }
    fs.mkdirSync(join(dir, "d.json"))
    fs.writeFileSync(join(dir, "d.json", "inner.json"), JSON.stringify(msg("m-inner", "I", 1)))
    fs.utimesSync(join(dir, "d.json"), hourAgo, hourAgo)
  }

  it("leaves each entry where the inbox/ rules would, and says so once", async () => {
    await using viaInbox = await tempQueue()
    await using orphans = await tempQueue()
    place(join(viaInbox.root, "inbox"))
    place(join(orphans.root, "processing"))
    const a = await spool("consume", ["--root", viaInbox.root, "--min-age", "10m"])
    const b = await spool("consume", ["--root", orphans.root, "--min-age", "10m"])
    expect(a.exitCode).toBe(0)
    expect(b.exitCode).toBe(0)
    const left = [".hidden.json", "fresh.json", "notes.txt", "x.json.part"]
    expect(list(join(viaInbox.root, "inbox"))).toEqual(left)
    expect(list(join(orphans.root, "processing"))).toEqual(left)
    for (const q of [viaInbox, orphans]) {
      expect(list(join(q.root, "done"))).toEqual(["old.json"])
      expect(list(join(q.root, "error"))).toEqual(["d.json"])
      expect(list(join(q.root, "error", "d.json"))).toEqual(["inner.json"])
      expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe("file,reason\nd.json,not-regular\n")
    }
    expect(b.stderr).toContain("level=warn msg=recovered file=old.json step=")
    expect(b.stderr).toContain("level=warn msg=recovered file=d.json step=")
    expect(b.stderr.match(/level=warn msg=left-in-processing count=3 /g)).toHaveLength(1)
    expect(b.stderr).toMatch(/level=notice msg=done files=2 .*recovered=2 too_young=1 seconds=/)
    // Once old enough, the young orphan is taken, as a young inbox/ file is.
    const hourAgo = new Date(Date.now() - 3_600_000)
    fs.utimesSync(join(orphans.root, "processing", "fresh.json"), hourAgo, hourAgo)
    const c = await spool("consume", ["--root", orphans.root, "--min-age", "10m"])
    expect(c.exitCode).toBe(0)
    expect(list(join(orphans.root, "processing"))).toEqual([".hidden.json", "notes.txt", "x.json.part"])
    expect(list(join(orphans.root, "done"))).toEqual(["fresh.json", "old.json"])
  })
})

describe("bun run consume refuses what is not a queue", () => {
  it("exits 2 and names bun run setup when the root does not exist", async () => {
    await using q = await tempQueue()
    const root = join(q.path, "nowhere")
    const r = await spool("consume", ["--root", root])
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(
      `consume: ${root} is not a spool queue: inbox/ is missing; create it with: bun run setup --root ${root}\n`,
    )
    expect(r.exitCode).toBe(2)
    expect(fs.existsSync(root)).toBe(false)
  })

  it("exits 2 when one directory is missing, leaving inbox/ untouched", async () => {
    await using q = await tempQueue({ seed: { "a.json": msg("m1", "A", 1) } })
    fs.rmdirSync(join(q.root, "done"))
    const r = await spool("consume", ["--root", q.root])
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain("done/ is missing")
    expect(r.stderr).toContain("bun run setup")
    expect(r.exitCode).toBe(2)
    expect(list(join(q.root, "inbox"))).toEqual(["a.json"])
    expect(fs.existsSync(join(q.root, "ledger.db"))).toBe(false)
  })

  it.skipIf(!canMountTmpfs)(
    "exits 2 with a message about filesystems when done/ is on another filesystem",
    async () => {
      await using q = await tempQueue({ seed: { "a.json": msg("m1", "A", 1) } })
      const done = join(q.root, "done")
      const mount = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", done], { stderr: "pipe" })
      expect(mount.stderr.toString()).toBe("")
      expect(mount.exitCode).toBe(0)
      try {
        const r = await spool("consume", ["--root", q.root])
        expect(r.stdout).toBe("")
        expect(r.stderr).toContain("are on different filesystems")
        expect(r.stderr).toContain("done/ on device")
        expect(r.stderr).toContain("put all five on one filesystem")
        expect(r.exitCode).toBe(2)
        expect(list(join(q.root, "inbox"))).toEqual(["a.json"])
        expect(list(done)).toEqual([])
      } finally {
        Bun.spawnSync(["umount", done])
      }
    },
  )

  it.skipIf(!canMountTmpfs)(
    "exits 2 when done/ is a bind mount of its own, whose renames fail although the filesystem is the same",
    async () => {
      await using q = await tempQueue({ seed: { "a.json": msg("m1", "A", 1) } })
      const done = join(q.root, "done")
      const mount = Bun.spawnSync(["mount", "--bind", done, done], { stderr: "pipe" })
      expect(mount.exitCode).toBe(0)
      try {
        const r = await spool("consume", ["--root", q.root])
        expect(r.stderr).toBe(
          `consume: ${done} is a mount of its own (a bind mount, or a container volume for one directory): a rename between it and the other queue directories fails even on one filesystem, so mount the queue root as a whole instead\n`,
        )
        expect(r.exitCode).toBe(2)
        expect(list(join(q.root, "inbox"))).toEqual(["a.json"])
        expect(list(join(q.root, "processing"))).toEqual([])
      } finally {
        Bun.spawnSync(["umount", done])
      }
    },
  )
})
