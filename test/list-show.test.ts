// `spool list` and `spool show` end to end on both ledgers, from one matrix: the real commands as
// processes on queues the real consume has drained, with a claim and some history written into
// the ledger the way a consumer and a replay write them.
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { type BackendQueue, ledgerBackends, repoRoot, tempQueue } from "@spool/test-support"

const message = (msgId: string, amount: number) => ({ msg_id: msgId, order_no: "O-1", seq: 1, amount })

type Listed = {
  dir: string
  name: string
  type: string
  size: number
  claim?: unknown
  failure?: unknown
  deferral?: unknown
}

/** The entries of `list --json`, by directory and name. */
function listed(stdout: string): Map<string, Listed> {
  return new Map((JSON.parse(stdout) as Listed[]).map((e) => [`${e.dir}/${e.name}`, e]))
}

for (const backend of await ledgerBackends())
  (backend.skip ? describe.skip : describe)(`spool list and show on ${backend.name}`, () => {
    // a.json processed as m-1 (with a stored result), then b.json its duplicate and c.json a
    // conflict; bad.json a parse error left in error/; fix.json a parse error corrected in
    // error/, replayed and then processed as m-2; p.json held in processing/ by a consumer.
    let q: BackendQueue
    let processedHash: string
    beforeAll(async () => {
      q = await backend.queue({ seed: { "a.json": message("m-1", 10), "bad.json": "{not json" } })
      q.put("fix.json", "{also not json")
      expect((await q.command("consume")).exitCode).toBe(0)
      q.put("b.json", message("m-1", 10))
      q.put("c.json", message("m-1", 99))
      expect((await q.command("consume")).exitCode).toBe(0)
      fs.writeFileSync(join(q.root, "error", "fix.json"), JSON.stringify(message("m-2", 5)))
      expect((await q.command("replay", ["fix.json"])).exitCode).toBe(0)
      expect((await q.command("consume")).exitCode).toBe(0)
      await q.exec("UPDATE processed SET result = ? WHERE msg_id = ?", [JSON.stringify({ cents: "1000" }), "m-1"])
      const [p] = await q.rows("SELECT payload_hash FROM processed WHERE msg_id = ?", ["m-1"])
      processedHash = String(p?.payload_hash)
      // The same bytes as a.json, refused by a handler under an earlier name and replayed.
      await q.insert("failures", {
        file: "a-early.json",
        original: "a-early.json",
        reason: "handler",
        detail: "ledger busy",
        payload_hash: processedHash,
        claim_id: "c-early",
        failed_at: "2020-01-01T00:00:00.000Z",
        replayed_at: "2020-01-01T00:01:00.000Z",
      })
      const [f] = await q.rows("SELECT id FROM failures WHERE claim_id = ?", ["c-early"])
      await q.insert("replays", {
        file: "a-early.json",
        failure_id: Number(f?.id),
        replayed_at: "2020-01-01T00:01:00.000Z",
      })
      // A consumer holding p.json, as claim and registration leave it.
      const now = new Date().toISOString()
      await q.insert("consumers", {
        owner_id: "owner-1",
        host: "host-a",
        pid: 4242,
        boot_id: "boot",
        start_ticks: "1",
        started_at: now,
        heartbeat_at: now,
      })
      await q.insert("claims", {
        name: "p.json",
        claim_id: "c-p",
        owner_id: "owner-1",
        attempts: 2,
        state: "claimed",
        claimed_at: now,
      })
      fs.writeFileSync(join(q.root, "processing", "p.json"), JSON.stringify(message("m-3", 1)))
      fs.writeFileSync(join(q.root, "processing", "orphan.json"), "{}")
    })
    afterAll(() => q[Symbol.asyncDispose]())

    it("lists inbox/, processing/ and error/ with the claim's owner and the failure's reason", async () => {
      q.put("waiting.json", message("m-4", 1))
      try {
        const r = await q.command("list")
        expect(r.stderr).toBe("")
        expect(r.exitCode).toBe(0)
        const all = r.stdout.trimEnd().split("\n")
        expect(all.at(-1)).toMatch(/^-- 4 files, \d+ bytes \(inbox 1, processing 2, deferred 0, error 1\)$/)
        const lines = all.slice(0, -1).sort()
        expect(lines).toHaveLength(4)
        expect(lines[0]).toMatch(/^error +\d+s +9 {2}bad\.json {2}reason=parse class=format$/)
        expect(lines[1]).toMatch(/^inbox +\d+s +\d+ {2}waiting\.json$/)
        expect(lines[2]).toMatch(/^processing +\d+s +2 {2}orphan\.json {2}claim=none$/)
        expect(lines[3]).toMatch(/^processing +\d+s +\d+ {2}p\.json {2}owner=host-a:4242 attempts=2$/)
      } finally {
        fs.rmSync(join(q.root, "inbox", "waiting.json"))
      }
    })

    it("lists deferred/ with each file's attempts and next attempt, and a file the ledger has no row for", async () => {
      fs.mkdirSync(join(q.root, "deferred"), { recursive: true })
      fs.writeFileSync(join(q.root, "deferred", "later.json"), JSON.stringify(message("m-5", 1)))
      fs.writeFileSync(join(q.root, "deferred", "stray.json"), "{}")
      await q.insert("deferrals", {
        file: "later.json",
        msg_id: "m-5",
        attempts: 3,
        first_deferred_at: "2030-01-01T00:00:00.000Z",
        next_attempt_at: "2030-01-01T01:00:00.000Z",
        last_error: "upstream busy",
        payload_hash: null,
        claim_id: "c-later",
      })
      try {
        const text = await q.command("list", ["deferred"])
        expect(text.stderr).toBe("")
        expect(text.exitCode).toBe(0)
        const lines = text.stdout.trimEnd().split("\n")
        expect(lines).toHaveLength(3)
        expect(lines[2]).toMatch(/^-- 2 files, \d+ bytes \(deferred 2\)$/)
        expect(lines.find((l) => l.includes("later.json"))).toMatch(
          /^deferred +\d+s +\d+ {2}later\.json {2}attempts=3 next=2030-01-01T01:00:00\.000Z$/,
        )
        expect(lines.find((l) => l.includes("stray.json"))).toMatch(
          /^deferred +\d+s +2 {2}stray\.json {2}deferral=none$/,
        )
        const all = listed((await q.command("list", ["--json", "deferred"])).stdout)
        expect(all.get("deferred/later.json")?.deferral).toEqual({
          msgId: "m-5",
          attempts: 3,
          firstDeferredAt: "2030-01-01T00:00:00.000Z",
          nextAttemptAt: "2030-01-01T01:00:00.000Z",
          lastError: "upstream busy",
        })
        expect(all.get("deferred/stray.json")?.deferral).toBeNull()
      } finally {
        await q.exec("DELETE FROM deferrals WHERE claim_id = ?", ["c-later"])
        for (const f of ["later.json", "stray.json"]) fs.rmSync(join(q.root, "deferred", f))
      }
    })

    it("lists done/ when named, as JSON, and counts what --limit leaves out", async () => {
      const r = await q.command("list", ["--json", "done", "--limit", "2"])
      expect(r.stderr).toBe("list: done/ has 2 more (--limit 2)\n")
      expect(r.exitCode).toBe(0)
      const entries = JSON.parse(r.stdout) as Listed[]
      expect(entries).toHaveLength(2)
      for (const e of entries) {
        expect(e.dir).toBe("done")
        expect(["a.json", "b.json", "c.json", "fix.json"]).toContain(e.name)
        expect(e).not.toHaveProperty("claim")
        expect(e).not.toHaveProperty("failure")
      }
    })

    it("gives each entry's ledger facts plainly in --json", async () => {
      const r = await q.command("list", ["--json", "processing", "error"])
      expect(r.stderr).toBe("")
      expect(r.exitCode).toBe(0)
      const all = listed(r.stdout)
      expect([...all.keys()].sort()).toEqual(["error/bad.json", "processing/orphan.json", "processing/p.json"])
      expect(all.get("processing/p.json")?.claim).toEqual({
        owner: "host-a:4242",
        ownerId: "owner-1",
        attempts: 2,
        state: "claimed",
      })
      expect(all.get("processing/orphan.json")?.claim).toBeNull()
      expect(all.get("error/bad.json")).toMatchObject({
        type: "file",
        size: 9,
        failure: { reason: "parse", class: "format" },
      })
    })

    it("shows a processed msg_id: its result, its duplicate and conflict, the failure of its bytes and its replay", async () => {
      const r = await q.command("show", ["--json", "m-1"])
      expect(r.stderr).toBe("")
      expect(r.exitCode).toBe(0)
      const s = JSON.parse(r.stdout)
      expect(s.kind).toBe("message")
      expect(s.history.processed).toMatchObject([{ msgId: "m-1", file: "a.json", result: { cents: "1000" } }])
      expect(s.history.duplicates.map((d: { file: string; isConflict: boolean }) => [d.file, d.isConflict])).toEqual([
        ["b.json", false],
        ["c.json", true],
      ])
      expect(s.history.failures).toMatchObject([
        { file: "a-early.json", reason: "handler", payloadHash: processedHash },
      ])
      expect(s.timeline.map((e: { event: string; file: string }) => `${e.event} ${e.file}`)).toEqual([
        "failed a-early.json",
        "replayed a-early.json",
        "processed a.json",
        "duplicate b.json",
        "conflict c.json",
      ])
      const text = await q.command("show", ["m-1"])
      expect(text.exitCode).toBe(0)
      const lines = text.stdout.trimEnd().split("\n")
      expect(lines[0]).toBe("msg_id m-1: processed from a.json")
      expect(lines[3]).toMatch(/ {2}processed {2}a\.json {2}msg_id=m-1 result=\{"cents":"1000"\}$/)
      expect(lines[5]).toMatch(/ {2}conflict {3}c\.json {2}msg_id=m-1$/)
    })

    it("shows a file that failed, was replayed and was then processed, and where it is now", async () => {
      const r = await q.command("show", ["--json", "fix.json"])
      expect(r.stderr).toBe("")
      expect(r.exitCode).toBe(0)
      const s = JSON.parse(r.stdout)
      expect(s).toMatchObject({ kind: "file", query: "fix.json", locations: ["done"], msgIds: ["m-2"] })
      expect(s.history.failures).toMatchObject([{ file: "fix.json", reason: "parse" }])
      expect(s.history.failures[0].replayedAt).toBeString()
      expect(s.timeline.map((e: { event: string }) => e.event)).toEqual(["failed", "replayed", "processed"])
      const text = await q.command("show", ["fix.json"])
      expect(text.stdout.split("\n")[0]).toBe("file fix.json: in done/; msg_id m-2")
      expect(text.exitCode).toBe(0)
    })

    it("shows a duplicate's file with its msg_id's whole history", async () => {
      const s = JSON.parse((await q.command("show", ["--json", "c.json"])).stdout)
      expect(s).toMatchObject({ kind: "file", locations: ["done"], msgIds: ["m-1"] })
      expect(s.history.processed).toMatchObject([{ file: "a.json" }])
    })

    it("shows a claimed file's owner and attempts", async () => {
      const s = JSON.parse((await q.command("show", ["--json", "p.json"])).stdout)
      expect(s).toMatchObject({ kind: "file", locations: ["processing"], msgIds: [] })
      expect(s.history.claims).toMatchObject([{ file: "p.json", owner: "host-a:4242", attempts: 2, state: "claimed" }])
    })

    it("prints a totals line for an empty listing too", async () => {
      const r = await q.command("list", ["inbox"])
      expect(r.stdout).toBe("-- 0 files, 0 bytes (inbox 0)\n")
      expect(r.stderr).toBe("")
      expect(r.exitCode).toBe(0)
    })

    it("prints the message itself with --body: the file's bytes, or a msg_id's processed file", async () => {
      const bad = await q.command("show", ["--body", "bad.json"])
      expect(bad.stdout).toEndWith("\n-- body of error/bad.json, 9 bytes --\n{not json\n")
      expect(bad.exitCode).toBe(0)
      const byId = await q.command("show", ["--body", "m-1"])
      expect(byId.stdout).toEndWith(
        `-- body of done/a.json, ${JSON.stringify(message("m-1", 10)).length} bytes --\n${JSON.stringify(message("m-1", 10))}\n`,
      )
      const json = JSON.parse((await q.command("show", ["--json", "--body", "fix.json"])).stdout)
      expect(json.body).toEqual({ dir: "done", file: "fix.json", text: JSON.stringify(message("m-2", 5)) })
      expect((await q.command("show", ["bad.json"])).stdout).not.toContain("-- body of")
    })

    it("prints a msg_id's own bytes with --body when its name was taken in done/ and it became name~1.json", async () => {
      await using fresh = await backend.queue()
      const put = (m: object) => fs.writeFileSync(join(fresh.root, "inbox", "x.json"), JSON.stringify(m))
      put({ msg_id: "A", order_no: "O", seq: 1, amount: 1 })
      expect((await fresh.command("consume", ["-q"])).exitCode).toBe(0)
      put({ msg_id: "B", order_no: "O", seq: 2, amount: 2 })
      expect((await fresh.command("consume", ["-q"])).exitCode).toBe(0)
      const b = await fresh.command("show", ["--body", "B"])
      expect(b.stdout).toEndWith(
        '-- body of done/x~1.json, 48 bytes --\n{"msg_id":"B","order_no":"O","seq":2,"amount":2}\n',
      )
      expect(b.exitCode).toBe(0)
      const a = await fresh.command("show", ["--body", "A"])
      expect(a.stdout).toEndWith(
        '-- body of done/x.json, 48 bytes --\n{"msg_id":"A","order_no":"O","seq":1,"amount":1}\n',
      )
      // An entry with no bytes of its own is named for what it is.
      Bun.spawnSync(["mkfifo", join(fresh.root, "error", "fifo.json")])
      const fifo = await fresh.command("show", ["--body", "fifo.json"])
      expect(fifo.stderr).toContain("error/fifo.json is a FIFO, not a regular file")
      expect(fifo.exitCode).toBe(1)
    })

    it("shows a msg_id longer than any file name can be", async () => {
      await using fresh = await backend.queue()
      const id = "k".repeat(300)
      fresh.put("long-id.json", message(id, 1))
      expect((await fresh.command("consume")).exitCode).toBe(0)
      const r = await fresh.command("show", [id])
      expect(r.stderr).toBe("")
      expect(r.stdout.split("\n")[0]).toBe(`msg_id ${id}: processed from long-id.json`)
      expect(r.exitCode).toBe(0)
    })

    it("exits 1 for a name or id neither the directories nor the ledger know, changing nothing", async () => {
      const before = await q.snapshot()
      const r = await q.command("show", ["nobody.json"])
      expect(r.stdout).toBe("")
      expect(r.stderr).toStartWith("show: no file or msg_id nobody.json in ")
      expect(r.exitCode).toBe(1)
      expect(await q.snapshot()).toEqual(before)
    })

    it("lists a name that is not UTF-8 in its %XX spelling, with its size and age, and its bytes for a shell", async () => {
      await using fresh = await backend.queue()
      const raw = Buffer.concat([Buffer.from(`${fresh.root}/inbox/x`), Buffer.of(0xff), Buffer.from(".json")])
      fs.writeFileSync(raw, "{}")
      fs.utimesSync(raw, new Date(Date.now() - 7_200_000), new Date(Date.now() - 7_200_000))
      const r = await fresh.command("list", ["--json", "inbox"])
      expect(r.stderr).toBe("")
      expect(r.exitCode).toBe(0)
      const [entry] = JSON.parse(r.stdout) as (Listed & { ageSeconds: number })[]
      expect(entry).toMatchObject({
        dir: "inbox",
        name: "x%FF.json",
        shellName: "x$'\\377'.json",
        type: "file",
        size: 2,
      })
      expect(entry?.ageSeconds).toBeGreaterThanOrEqual(7200)
      // A file whose real name is that %XX spelling is told apart in the text listing, and a shell
      // given each printed name finds that very file.
      fs.writeFileSync(join(fresh.root, "inbox", "x%FF.json"), "{1}")
      const text = await fresh.command("list", ["inbox"])
      const names = text.stdout.split("\n").flatMap((l) => (l.startsWith("inbox") ? [l.split(/ +/).at(-1)] : []))
      expect(names.sort()).toEqual(["x$'\\377'.json", "x%FF.json"])
      for (const [name, size] of [
        ["x$'\\377'.json", 2],
        ["x%FF.json", 3],
      ] as const) {
        const stat = Bun.spawnSync(["bash", "-c", `stat -c %s ${name}`], { cwd: join(fresh.root, "inbox") })
        expect([name, stat.stdout.toString().trim()]).toEqual([name, String(size)])
      }
    })

    it("lists without owners or reasons where there is no ledger yet, and creates none", async () => {
      await using fresh = await backend.queue({ seed: { "x.json": message("m-9", 1) } })
      fs.writeFileSync(join(fresh.root, "processing", "p.json"), "{}")
      const shown = await fresh.command("show", ["x.json"])
      expect(shown.stdout).toBe("file x.json: in inbox/\n(no ledger rows)\n")
      expect(shown.exitCode).toBe(0)
      expect((await fresh.command("show", ["m-9"])).exitCode).toBe(1)
      // A file in error/ is history a ledger should hold (show refuses then), but list still lists.
      fs.writeFileSync(join(fresh.root, "error", "e.json"), "{}")
      const r = await fresh.command("list", ["--json"])
      expect(r.stderr).toBe("")
      expect(r.exitCode).toBe(0)
      const all = listed(r.stdout)
      expect([...all.keys()].sort()).toEqual(["error/e.json", "inbox/x.json", "processing/p.json"])
      expect(all.get("error/e.json")?.failure).toBeNull()
      expect(all.get("processing/p.json")?.claim).toBeNull()
      expect(await fresh.tables()).toEqual([])
      expect(fs.existsSync(join(fresh.root, "ledger.db"))).toBe(false)
    })
  })

describe("spool list read by a program that stops early (`spool list | head -1`)", () => {
  it("exits 0 without a word once the reader has gone, however much was left to write", async () => {
    await using q = await tempQueue()
    for (let i = 0; i < 6000; i++) fs.writeFileSync(join(q.root, "inbox", `f${i}.json`), "")
    const p = Bun.spawn(["bun", join(repoRoot, "packages/spool/bin/spool.ts"), "list", "--root", q.root], {
      stdout: "pipe",
      stderr: "pipe",
    })
    const reader = p.stdout.getReader()
    expect((await reader.read()).done).toBe(false)
    await reader.cancel()
    const [stderr, code] = await Promise.all([new Response(p.stderr).text(), p.exited])
    expect(stderr).toBe("")
    expect(code).toBe(0)
  })
})
