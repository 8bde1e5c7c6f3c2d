import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { createQueue, type Queue, SpoolError } from "@spool/core"
import { openExistingLedger, openSqliteLedger } from "@spool/core/engine"
import {
  checkReplayable,
  checkReplayName,
  moveAndMark,
  parseSelection,
  type Repeat,
  replayFile,
  replayFiles,
  type Selection,
  selectFiles,
} from "./replay.ts"
import { repeatWarning, skippedLine } from "./replay-unchanged.ts"

const NOW = new Date("2026-11-29T10:00:00.000Z")

type SqliteLedger = ReturnType<typeof openSqliteLedger>

interface TempQueue extends AsyncDisposable {
  readonly dir: string
  readonly queue: Queue
  readonly ledger: SqliteLedger
}

/**
 * A queue whose error/ holds bad.json with a failure record (reason parse), as consume leaves it,
 * except that the record has no hash and the file is written after the failure's time: to the
 * format rule (see replay-unchanged.ts) it is a corrected file, so these tests are about the move.
 */
async function failedQueue(): Promise<TempQueue> {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-replay-"))
  const queue = createQueue(join(dir, "q"))
  const ledger = openSqliteLedger(queue, { durable: false })
  const [claim] = ledger.claim("o", ["bad.json"], "2026-11-29T09:00:00.000Z")
  ledger.commit(
    "o",
    [
      {
        kind: "rejected",
        name: "bad.json",
        claimId: claim?.claimId as string,
        destName: "bad.json",
        reason: "parse",
        detail: "JSON Parse error",
        hash: null,
      },
    ],
    "2026-11-29T09:00:00.000Z",
  )
  fs.writeFileSync(join(queue.error, "bad.json"), "{not json")
  return {
    dir,
    queue,
    ledger,
    async [Symbol.asyncDispose]() {
      ledger.close()
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

function ledgerState(ledger: SqliteLedger) {
  return {
    failures: ledger.db.query("SELECT id, file, reason, replayed_at FROM failures ORDER BY id").all(),
    replays: ledger.db.query("SELECT file, failure_id, replayed_at FROM replays ORDER BY id").all(),
  }
}

function refusal(fn: () => unknown): SpoolError {
  try {
    fn()
  } catch (error) {
    if (error instanceof SpoolError) return error
    throw error
  }
  throw new Error("expected a refusal")
}

async function refusalOf(pending: Promise<unknown>): Promise<SpoolError> {
  try {
    await pending
  } catch (error) {
    if (error instanceof SpoolError) return error
    throw error
  }
  throw new Error("expected a refusal")
}

describe("checkReplayName", () => {
  it.each(["", ".", "..", "a/b.json", "/etc/passwd", "../done/x.json", "error/x.json", "./x.json", "x.json/", "a\0b"])(
    "refuses %p",
    (name) => {
      expect(refusal(() => checkReplayName(name)).code).toBe("refused")
    },
  )

  it.each(["x.json", "with space.json", "-dash.json", "a,b\"c'.json", "new\nline.json", "ünïcødé.json", "..x.json"])(
    "accepts the plain name %p",
    (name) => {
      expect(() => checkReplayName(name)).not.toThrow()
    },
  )
})

describe("checkReplayable", () => {
  it("refuses a name that is only in done/, saying so", async () => {
    await using t = await failedQueue()
    fs.writeFileSync(join(t.queue.done, "ok.json"), "{}")
    expect(refusal(() => checkReplayable(t.queue, "ok.json")).message).toContain("in done/")
  })

  it("refuses a symbolic link, a directory and a FIFO in error/ without following or opening them", async () => {
    await using t = await failedQueue()
    fs.symlinkSync(join(t.queue.error, "bad.json"), join(t.queue.error, "link.json"))
    fs.mkdirSync(join(t.queue.error, "dir.json"))
    Bun.spawnSync(["mkfifo", join(t.queue.error, "fifo.json")])
    for (const n of ["link.json", "dir.json", "fifo.json"])
      expect(refusal(() => checkReplayable(t.queue, n)).code).toBe("refused")
  })

  it("refuses when the name is taken in inbox/ (even by a dangling link) or in processing/", async () => {
    await using t = await failedQueue()
    fs.symlinkSync("/nonexistent", join(t.queue.inbox, "bad.json"))
    expect(refusal(() => checkReplayable(t.queue, "bad.json")).message).toContain("inbox/ already holds")
    fs.rmSync(join(t.queue.inbox, "bad.json"))
    fs.writeFileSync(join(t.queue.processing, "bad.json"), "{}")
    expect(refusal(() => checkReplayable(t.queue, "bad.json")).message).toContain("processing")
  })
})

describe("replayFile", () => {
  it("moves the file back to inbox/, marks its failure record and logs the replay", async () => {
    await using t = await failedQueue()
    const r = await replayFile(t.queue, t.ledger, "bad.json", NOW)
    expect(r).toEqual({ file: "bad.json", reason: "parse", isRecordMarked: true, repeat: undefined })
    expect(fs.readFileSync(join(t.queue.inbox, "bad.json"), "utf8")).toBe("{not json")
    expect(fs.existsSync(join(t.queue.error, "bad.json"))).toBe(false)
    expect(ledgerState(t.ledger)).toEqual({
      failures: [{ id: 1, file: "bad.json", reason: "parse", replayed_at: NOW.toISOString() }],
      replays: [{ file: "bad.json", failure_id: 1, replayed_at: NOW.toISOString() }],
    })
  })

  it("replays a file the ledger has no record of, and logs the replay without a failure id", async () => {
    await using t = await failedQueue()
    fs.writeFileSync(join(t.queue.error, "dropped-by-hand.json"), "{}")
    expect((await replayFile(t.queue, t.ledger, "dropped-by-hand.json", NOW)).isRecordMarked).toBe(false)
    expect(ledgerState(t.ledger).replays).toEqual([
      { file: "dropped-by-hand.json", failure_id: null, replayed_at: NOW.toISOString() },
    ])
  })

  it("moves a file replayed maxReplays times already, logs this replay too, and says how often it was replayed", async () => {
    await using t = await failedQueue()
    t.ledger.markReplayed("bad.json", NOW.toISOString())
    const r = await replayFile(t.queue, t.ledger, "bad.json", NOW, 1)
    expect(r.repeat).toEqual({ kind: "too-often", count: 1, maxReplays: 1 })
    expect(fs.readdirSync(t.queue.inbox)).toEqual(["bad.json"])
    expect(t.ledger.replayCount("bad.json")).toBe(2)
  })

  it("rolls the ledger back when a file of the same name lands in inbox/ after the checks", async () => {
    await using t = await failedQueue()
    const before = ledgerState(t.ledger)
    // The checks passed earlier; the producer's file arrives just before the move.
    fs.writeFileSync(join(t.queue.inbox, "bad.json"), "producer's")
    const e = await refusalOf(moveAndMark(t.queue, t.ledger, "bad.json", NOW, named))
    expect(e.code).toBe("refused")
    expect(fs.readFileSync(join(t.queue.inbox, "bad.json"), "utf8")).toBe("producer's")
    expect(fs.readFileSync(join(t.queue.error, "bad.json"), "utf8")).toBe("{not json")
    expect(ledgerState(t.ledger)).toEqual(before)
    expect(t.ledger.db.inTransaction).toBe(false)
  })

  it("rolls the ledger back when the file leaves error/ after the checks", async () => {
    await using t = await failedQueue()
    const before = ledgerState(t.ledger)
    fs.rmSync(join(t.queue.error, "bad.json"))
    expect((await refusalOf(moveAndMark(t.queue, t.ledger, "bad.json", NOW, named))).code).toBe("refused")
    expect(ledgerState(t.ledger)).toEqual(before)
    expect(fs.readdirSync(t.queue.inbox)).toEqual([])
  })
})

/** Records a failure under `name` with `reason` and writes the file into error/, as consume does. */
function fail(t: TempQueue, name: string, reason: string, content = "{}"): void {
  // Claimed and committed as consume does (the commit is fenced by the claim), then forgotten.
  const at = "2026-11-29T09:00:00.000Z"
  const [claim] = t.ledger.claim("o", [name], at)
  if (claim === undefined) throw new Error("no claim")
  t.ledger.commit(
    "o",
    [{ kind: "rejected", name: claim.name, claimId: claim.claimId, destName: name, reason, detail: "", hash: null }],
    at,
  )
  t.ledger.claim("o", [], at, [claim])
  fs.writeFileSync(join(t.queue.error, name), content)
}

/** Every entry of the four directories with its bytes (or its kind), and the ledger's replay bookkeeping. */
function fullState(t: TempQueue) {
  const dir = (d: string) =>
    fs
      .readdirSync(d)
      .sort()
      .map((n) => {
        const st = fs.lstatSync(join(d, n))
        return [n, st.isFile() ? fs.readFileSync(join(d, n), "utf8") : st.isDirectory() ? "dir" : "other"]
      })
  const q = t.queue
  return { dirs: [q.inbox, q.processing, q.done, q.error].map(dir), ...ledgerState(t.ledger) }
}

/** How a selection treats repeating files (skips them), and how named files do (moves them). */
const selected = { maxReplays: 3, isTakingRepeats: false }
const named = { maxReplays: 3, isTakingRepeats: true }
const bulk = { ...selected, isDryRun: false, now: NOW }

type Values = Parameters<typeof parseSelection>[0]

describe("parseSelection", () => {
  const reads: [string, Values, string[], Selection][] = [
    ["several names", {}, ["b.json", "a.json"], { kind: "names", names: ["b.json", "a.json"] }],
    ["a glob", { match: ["evt-*"] }, [], { kind: "match", patterns: ["evt-*"] }],
    ["several globs", { match: ["a*", "b*"] }, [], { kind: "match", patterns: ["a*", "b*"] }],
    ["a reason", { reason: "missing-field" }, [], { kind: "reason", reason: "missing-field" }],
    ["--all", { all: true }, [], { kind: "all" }],
    ["a class", { class: "business" }, [], { kind: "class", errorClass: "business" }],
    ["a msg_id", { id: "m-1" }, [], { kind: "id", msgId: "m-1" }],
  ]
  it.each(reads)("reads %s", (_case, values, positionals, selection) => {
    expect(parseSelection(values, positionals)).toEqual(selection)
  })

  const usageErrors: [string, Values, string[]][] = [
    ["nothing chosen", {}, []],
    ["names and --all", { all: true }, ["a.json"]],
    ["--match and --reason", { match: ["x"], reason: "parse" }, []],
    ["a glob with a path", { match: ["../done/*"] }, []],
    ["an empty glob", { match: [""] }, []],
    ["an empty reason", { reason: "" }, []],
    ["an unknown class", { class: "other" }, []],
    ["an empty msg_id", { id: "" }, []],
    ["--id and --class", { id: "m-1", class: "format" }, []],
  ]
  it.each(usageErrors)("refuses %s as a usage error", (_case, values, positionals) => {
    expect(refusal(() => parseSelection(values, positionals)).code).toBe("usage")
  })
})

describe("selectFiles", () => {
  const tricky = ["evt a.json", "evt,b.json", "evt-[1].json", "evt-*.json", "evt-{x,y}.json", "evt-(p).json"]

  it("matches names with spaces, commas, brackets and * against a glob, and escapes take them literally", async () => {
    await using t = await failedQueue()
    for (const n of [...tricky, "evt-1.json", "other.json"]) fs.writeFileSync(join(t.queue.error, n), "{}")
    const match = (...patterns: string[]) => selectFiles(t.queue, { kind: "match", patterns }, () => t.ledger)
    expect(await match("evt*")).toEqual([...tricky, "evt-1.json"].sort())
    expect(await match("evt-\\*.json")).toEqual(["evt-*.json"])
    expect(await match("evt-\\[1\\].json")).toEqual(["evt-[1].json"])
    expect(await match("evt-\\{x,y\\}.json")).toEqual(["evt-{x,y}.json"])
    expect(await match("evt-\\(p\\).json")).toEqual(["evt-(p).json"])
    expect(await match("evt a.json", "evt,b.json")).toEqual(["evt a.json", "evt,b.json"])
    expect(await match("nothing-*")).toEqual([])
  })

  it("selects links, directories and FIFOs by glob and by --all, but never what is inside a directory", async () => {
    await using t = await failedQueue()
    fs.symlinkSync("/nonexistent", join(t.queue.error, "link.json"))
    fs.mkdirSync(join(t.queue.error, "dir.json"))
    fs.writeFileSync(join(t.queue.error, "dir.json", "inner.json"), "{}")
    expect(Bun.spawnSync(["mkfifo", join(t.queue.error, "fifo.json")]).exitCode).toBe(0)
    const all = ["bad.json", "dir.json", "fifo.json", "link.json"]
    expect(await selectFiles(t.queue, { kind: "match", patterns: ["*"] }, () => t.ledger)).toEqual(all)
    expect(await selectFiles(t.queue, { kind: "match", patterns: ["**"] }, () => t.ledger)).toEqual(all)
    expect(await selectFiles(t.queue, { kind: "match", patterns: ["dir.json"] }, () => t.ledger)).toEqual(["dir.json"])
    expect(await selectFiles(t.queue, { kind: "all" }, () => t.ledger)).toEqual(all)
  })

  it("selects by the reason of each file's latest unreplayed failure", async () => {
    await using t = await failedQueue()
    fail(t, "m1.json", "missing-field")
    fail(t, "m2.json", "missing-field")
    fail(t, "i1.json", "invalid-field")
    // m2.json failed with missing-field, was replayed, then failed again with parse.
    t.ledger.markReplayed("m2.json", NOW.toISOString())
    fail(t, "m2.json", "parse")
    const byReason = (reason: string) => selectFiles(t.queue, { kind: "reason", reason }, () => t.ledger)
    expect(await byReason("missing-field")).toEqual(["m1.json"])
    expect(await byReason("parse")).toEqual(["bad.json", "m2.json"])
    expect(await byReason("handler")).toEqual([])
  })

  it("selects by the class of each file's latest unreplayed failure", async () => {
    await using t = await failedQueue()
    fail(t, "h.json", "handler")
    fail(t, "p.json", "poison")
    fail(t, "m.json", "missing-field")
    // Failed with handler, replayed, then failed again with parse: format now.
    fail(t, "again.json", "handler")
    t.ledger.markReplayed("again.json", NOW.toISOString())
    fail(t, "again.json", "parse")
    fs.writeFileSync(join(t.queue.error, "no-record.json"), "{}")
    const byClass = (errorClass: "business" | "format") =>
      selectFiles(t.queue, { kind: "class", errorClass }, () => t.ledger)
    expect(await byClass("business")).toEqual(["h.json", "p.json"])
    expect(await byClass("format")).toEqual(["again.json", "bad.json", "m.json"])
  })

  it("selects by msg_id the regular files whose JSON carries it, reading error/ itself", async () => {
    await using t = await failedQueue()
    const msg = (id: unknown) => JSON.stringify({ msg_id: id, seq: 1 })
    fail(t, "a.json", "handler", msg("m-1"))
    fail(t, "b.json", "missing-field", `\ufeff${msg("m-1")}`)
    fail(t, "c.json", "handler", msg("m-2"))
    fail(t, "dup-keys.json", "handler", '{"msg_id":"m-1","msg_id":"m-3"}')
    fail(t, "number.json", "invalid-field", msg(1))
    fail(t, "nested.json", "missing-field", JSON.stringify({ inner: { msg_id: "m-1" } }))
    fail(t, "bad-utf8.json", "parse")
    // m-1's message with a byte that is not UTF-8 after it: consume rejects it as parse, so no msg_id.
    fs.writeFileSync(
      join(t.queue.error, "bad-utf8.json"),
      Buffer.concat([Buffer.from(msg("m-1")), Buffer.from([0xff])]),
    )
    fs.symlinkSync(join(t.queue.error, "a.json"), join(t.queue.error, "link.json"))
    const byId = (msgId: string) => selectFiles(t.queue, { kind: "id", msgId }, () => t.ledger)
    expect(await byId("m-1")).toEqual(["a.json", "b.json"])
    expect(await byId("m-3")).toEqual(["dup-keys.json"])
    expect(await byId("1")).toEqual([])
    expect(await byId("nothing")).toEqual([])
  })

  it("selects nothing by reason, and creates no ledger, when the queue has none yet", async () => {
    await using t = await failedQueue()
    const queue = createQueue(join(t.dir, "fresh"))
    fs.writeFileSync(join(queue.error, "x.json"), "{}")
    const ledger = () => openExistingLedger(queue)
    expect(await selectFiles(queue, { kind: "reason", reason: "parse" }, ledger)).toEqual([])
    expect(fs.readdirSync(queue.root).sort()).toEqual(["deferred", "done", "error", "inbox", "processing", "tmp"])
  })

  it("takes named files as given, each once, sorted", async () => {
    await using t = await failedQueue()
    expect(await selectFiles(t.queue, { kind: "names", names: ["b", "a", "b"] }, () => t.ledger)).toEqual(["a", "b"])
  })
})

describe("replayFiles", () => {
  it("moves every selected file, each with its failure record marked and a replay logged", async () => {
    await using t = await failedQueue()
    fail(t, "m1.json", "missing-field", "m1")
    const outcomes = await replayFiles(t.queue, () => t.ledger, ["bad.json", "m1.json"], bulk)
    expect(outcomes.map((o) => [o.file, o.kind])).toEqual([
      ["bad.json", "moved"],
      ["m1.json", "moved"],
    ])
    expect(fs.readdirSync(t.queue.inbox).sort()).toEqual(["bad.json", "m1.json"])
    expect(fs.readFileSync(join(t.queue.inbox, "m1.json"), "utf8")).toBe("m1")
    expect(fs.readdirSync(t.queue.error)).toEqual([])
    expect(ledgerState(t.ledger).failures.map((f) => (f as { replayed_at: string }).replayed_at)).toEqual([
      NOW.toISOString(),
      NOW.toISOString(),
    ])
    expect(ledgerState(t.ledger).replays.map((r) => (r as { file: string }).file)).toEqual(["bad.json", "m1.json"])
  })

  it("skips a file whose name is taken in inbox/, leaving both files and its record as they were, and moves the rest", async () => {
    await using t = await failedQueue()
    fail(t, "m1.json", "missing-field")
    fs.writeFileSync(join(t.queue.inbox, "bad.json"), "producer's")
    const outcomes = await replayFiles(t.queue, () => t.ledger, ["bad.json", "m1.json"], bulk)
    expect(outcomes[0]).toEqual({
      file: "bad.json",
      kind: "refused",
      why: "inbox/ already holds a file of that name; move or rename one of them first",
    })
    expect(outcomes[1]?.kind).toBe("moved")
    expect(fs.readFileSync(join(t.queue.inbox, "bad.json"), "utf8")).toBe("producer's")
    expect(fs.readFileSync(join(t.queue.error, "bad.json"), "utf8")).toBe("{not json")
    expect(ledgerState(t.ledger).replays.map((r) => (r as { file: string }).file)).toEqual(["m1.json"])
  })

  it("refuses links, directories, FIFOs and absent names without touching them", async () => {
    await using t = await failedQueue()
    fs.symlinkSync(join(t.queue.error, "bad.json"), join(t.queue.error, "link.json"))
    fs.mkdirSync(join(t.queue.error, "dir.json"))
    expect(Bun.spawnSync(["mkfifo", join(t.queue.error, "fifo.json")]).exitCode).toBe(0)
    const before = fullState(t)
    const names = ["absent.json", "dir.json", "fifo.json", "link.json"]
    const outcomes = await replayFiles(t.queue, () => t.ledger, names, bulk)
    expect(outcomes.map((o) => o.kind)).toEqual(["refused", "refused", "refused", "refused"])
    expect(fullState(t)).toEqual(before)
  })

  it("never asks for the ledger when every file is refused by the checks", async () => {
    await using t = await failedQueue()
    const outcomes = await replayFiles(
      t.queue,
      () => {
        throw new Error("the ledger was opened")
      },
      ["absent.json"],
      bulk,
    )
    expect(outcomes.map((o) => o.kind)).toEqual(["refused"])
  })

  it("skips a file already replayed --max-replays times, changing nothing, and moves it when taking repeats", async () => {
    await using t = await failedQueue()
    for (let i = 0; i < 2; i++) t.ledger.markReplayed("bad.json", NOW.toISOString())
    expect(t.ledger.replayCount("bad.json")).toBe(2)
    // Two replays logged: allowed under --max-replays 3, a repeat at --max-replays 2.
    const before = fullState(t)
    const skipped = await replayFiles(t.queue, () => t.ledger, ["bad.json"], { ...bulk, maxReplays: 2 })
    expect(skipped).toEqual([
      { file: "bad.json", kind: "skipped", repeat: { kind: "too-often", count: 2, maxReplays: 2 } },
    ])
    expect(fullState(t)).toEqual(before)
    expect(t.ledger.db.inTransaction).toBe(false)
    const taken = await replayFiles(t.queue, () => t.ledger, ["bad.json"], {
      ...bulk,
      maxReplays: 2,
      isTakingRepeats: true,
    })
    expect(taken).toMatchObject([{ kind: "moved", replayed: { repeat: { kind: "too-often", count: 2 } } }])
    expect(t.ledger.replayCount("bad.json")).toBe(3)
  })

  it("counts replays per file name, so other files are not limited by it", async () => {
    await using t = await failedQueue()
    fail(t, "m1.json", "missing-field")
    t.ledger.markReplayed("bad.json", NOW.toISOString())
    const outcomes = await replayFiles(t.queue, () => t.ledger, ["bad.json", "m1.json"], { ...bulk, maxReplays: 1 })
    expect(outcomes.map((o) => [o.file, o.kind])).toEqual([
      ["bad.json", "skipped"],
      ["m1.json", "moved"],
    ])
  })

  it("in a dry run reports what would move, be refused and be skipped, and changes nothing", async () => {
    await using t = await failedQueue()
    fail(t, "m1.json", "missing-field")
    fail(t, "m2.json", "missing-field")
    fs.writeFileSync(join(t.queue.inbox, "m1.json"), "producer's")
    t.ledger.markReplayed("m2.json", NOW.toISOString())
    fs.writeFileSync(join(t.queue.error, "m2.json"), "{}")
    const before = fullState(t)
    const dry = { ...bulk, maxReplays: 1, isDryRun: true }
    const names = ["bad.json", "m1.json", "m2.json"]
    const outcomes = await replayFiles(t.queue, () => t.ledger, names, dry)
    expect(outcomes.map((o) => [o.file, o.kind])).toEqual([
      ["bad.json", "would-move"],
      ["m1.json", "refused"],
      ["m2.json", "skipped"],
    ])
    const taking = await replayFiles(t.queue, () => t.ledger, names, { ...dry, isTakingRepeats: true })
    expect(taking[2]).toEqual({
      file: "m2.json",
      kind: "would-move",
      repeat: { kind: "too-often", count: 1, maxReplays: 1 },
    })
    expect(fullState(t)).toEqual(before)
  })

  it("in a dry run without a ledger counts no replays", async () => {
    await using t = await failedQueue()
    const outcomes = await replayFiles(t.queue, () => undefined, ["bad.json"], {
      ...bulk,
      maxReplays: 1,
      isDryRun: true,
    })
    expect(outcomes.map((o) => o.kind)).toEqual(["would-move"])
  })

  it("reports a refusal decided inside the transaction in the file's own words (name with a quote and colon)", async () => {
    await using t = await failedQueue()
    const name = 'a": b.json'
    fail(t, name, "handler")
    // The checks passed; the producer's file arrives while the ledger is being opened.
    const ledger = () => {
      fs.writeFileSync(join(t.queue.inbox, name), "producer's")
      return t.ledger
    }
    const outcomes = await replayFiles(t.queue, ledger, [name], bulk)
    expect(outcomes).toEqual([{ file: name, kind: "refused", why: "a file of that name just appeared in inbox/" }])
    expect(fs.readFileSync(join(t.queue.error, name), "utf8")).toBe("{}")
  })
})

describe("moveAndMark and a format error's file", () => {
  /** error/x.json failed with `reason` and the hash of `content` at `failedAt`, then written with `content`. */
  function hashedFailure(t: TempQueue, reason: string, content: string, failedAt = NOW.toISOString()): void {
    const [claim] = t.ledger.claim("o", ["x.json"], failedAt)
    if (claim === undefined) throw new Error("no claim")
    const hash = Bun.CryptoHasher.hash("sha256", content, "hex")
    t.ledger.commit(
      "o",
      [{ kind: "rejected", name: "x.json", claimId: claim.claimId, destName: "x.json", reason, detail: "", hash }],
      failedAt,
    )
    t.ledger.claim("o", [], failedAt, [claim])
    fs.writeFileSync(join(t.queue.error, "x.json"), content)
  }

  it("skips an unchanged one inside the transaction, changing nothing, and moves it when taking repeats", async () => {
    await using t = await failedQueue()
    hashedFailure(t, "missing-field", '{"msg_id":"m-1"}')
    const before = fullState(t)
    const unchanged: Repeat = { kind: "unchanged", reason: "missing-field", isHashed: true }
    expect(await moveAndMark(t.queue, t.ledger, "x.json", NOW, selected)).toEqual({
      kind: "skipped",
      repeat: unchanged,
    })
    expect(fullState(t)).toEqual(before)
    expect(t.ledger.db.inTransaction).toBe(false)
    expect(await moveAndMark(t.queue, t.ledger, "x.json", NOW, named)).toEqual({
      kind: "moved",
      replayed: { file: "x.json", reason: "missing-field", isRecordMarked: true, repeat: unchanged },
    })
    expect(fs.readFileSync(join(t.queue.inbox, "x.json"), "utf8")).toBe('{"msg_id":"m-1"}')
    expect(ledgerState(t.ledger).replays).toHaveLength(1)
  })

  it("moves it once corrected in error/, and a business error's file unchanged, as no repeat", async () => {
    await using t = await failedQueue()
    hashedFailure(t, "parse", "{not json")
    fs.writeFileSync(join(t.queue.error, "x.json"), '{"msg_id":"m-1"}')
    expect(await moveAndMark(t.queue, t.ledger, "x.json", NOW, selected)).toMatchObject({
      kind: "moved",
      replayed: { reason: "parse", repeat: undefined },
    })
    fs.rmSync(join(t.queue.inbox, "x.json"))
    hashedFailure(t, "handler", '{"msg_id":"m-1"}')
    expect(await moveAndMark(t.queue, t.ledger, "x.json", NOW, selected)).toMatchObject({
      kind: "moved",
      replayed: { reason: "handler", repeat: undefined },
    })
  })

  it("takes one recorded without a hash (never read) as unchanged unless written after it failed", async () => {
    await using t = await failedQueue()
    fail(t, "big.json", "too-large", "x".repeat(100))
    // fail() records the failure at 2026-11-29T09:00Z; dated before it, the file is the one that failed.
    const before = new Date("2026-11-29T08:00:00.000Z")
    fs.utimesSync(join(t.queue.error, "big.json"), before, before)
    expect(await moveAndMark(t.queue, t.ledger, "big.json", NOW, selected)).toEqual({
      kind: "skipped",
      repeat: { kind: "unchanged", reason: "too-large", isHashed: false },
    })
    expect(fs.readdirSync(t.queue.inbox)).toEqual([])
    const after = new Date("2026-11-29T09:30:00.000Z")
    fs.utimesSync(join(t.queue.error, "big.json"), after, after)
    expect(await moveAndMark(t.queue, t.ledger, "big.json", NOW, selected)).toMatchObject({ kind: "moved" })
  })

  it("in a dry run reports an unchanged one as skipped, and when taking repeats as one that would move", async () => {
    await using t = await failedQueue()
    hashedFailure(t, "invalid-field", '{"seq":"x"}')
    const before = fullState(t)
    const dry = { ...bulk, isDryRun: true }
    const repeat: Repeat = { kind: "unchanged", reason: "invalid-field", isHashed: true }
    expect(await replayFiles(t.queue, () => t.ledger, ["x.json"], dry)).toEqual([
      { file: "x.json", kind: "skipped", repeat },
    ])
    expect(await replayFiles(t.queue, () => t.ledger, ["x.json"], { ...dry, isTakingRepeats: true })).toEqual([
      { file: "x.json", kind: "would-move", repeat },
    ])
    expect(fullState(t)).toEqual(before)
  })
})

describe("moveAndMark and the file's age", () => {
  it("sets the replayed file's mtime to the replay's time, its bytes unchanged", async () => {
    await using t = await failedQueue()
    const written = new Date("2026-01-01T00:00:00.000Z")
    fs.utimesSync(join(t.queue.error, "bad.json"), written, written)
    // The failure is of 2026-11-29T09:00Z: a file dated before it is unchanged, so taken as a repeat.
    await moveAndMark(t.queue, t.ledger, "bad.json", NOW, named)
    const st = fs.statSync(join(t.queue.inbox, "bad.json"))
    expect(st.mtimeMs).toBe(NOW.getTime())
    expect(fs.readFileSync(join(t.queue.inbox, "bad.json"), "utf8")).toBe("{not json")
  })

  it("leaves the mtime of a file whose replay was refused", async () => {
    await using t = await failedQueue()
    const written = new Date("2026-11-29T09:30:00.000Z")
    fs.utimesSync(join(t.queue.error, "bad.json"), written, written)
    fs.writeFileSync(join(t.queue.inbox, "bad.json"), "producer's")
    expect((await refusalOf(moveAndMark(t.queue, t.ledger, "bad.json", NOW, named))).code).toBe("refused")
    expect(fs.statSync(join(t.queue.error, "bad.json")).mtimeMs).toBe(written.getTime())
  })
})

describe("moveAndMark with a replay limit", () => {
  it("skips and rolls back when the limit is reached, even when the file would otherwise move", async () => {
    await using t = await failedQueue()
    t.ledger.markReplayed("bad.json", NOW.toISOString())
    const before = fullState(t)
    expect(await moveAndMark(t.queue, t.ledger, "bad.json", NOW, { ...selected, maxReplays: 1 })).toEqual({
      kind: "skipped",
      repeat: { kind: "too-often", count: 1, maxReplays: 1 },
    })
    expect(fullState(t)).toEqual(before)
  })
})

describe("the lines about repeating files", () => {
  it("warns that a moved file will fail the same way, and says what to do", () => {
    expect(repeatWarning({ kind: "unchanged", reason: "parse", isHashed: true })).toBe(
      "it failed with parse, a format error, and its bytes are the ones that failed, so it will fail the same way; " +
        "fix it at the source, or correct it in error/ before replaying it",
    )
    expect(repeatWarning({ kind: "too-often", count: 1, maxReplays: 1 })).toStartWith(
      "it was already replayed 1 time (--max-replays 1), so it will likely fail the same way; fix it at the source",
    )
  })

  const lines: [string, Repeat[], number, boolean, string][] = [
    [
      "one unchanged format error",
      [{ kind: "unchanged", reason: "parse", isHashed: true }],
      1,
      false,
      "skipped 1 of 1 selected file, which would fail the same way (1 format error unchanged since failing)",
    ],
    [
      "both kinds, in a dry run",
      [
        { kind: "too-often", count: 4, maxReplays: 3 },
        { kind: "unchanged", reason: "parse", isHashed: true },
        { kind: "unchanged", reason: "too-large", isHashed: false },
      ],
      5,
      true,
      "dry run: would skip 3 of 5 selected files, which would fail the same way (2 format errors unchanged since " +
        "failing, 1 already replayed --max-replays 3 times)",
    ],
  ]
  it.each(lines)("sums up %s in one line", (_case, repeats, selectedCount, isDryRun, start) => {
    const line = skippedLine(repeats, selectedCount, isDryRun)
    expect(line).toBe(
      `${start}: fix them at the source, or correct them in error/ first; --include-unchanged replays them as they are`,
    )
  })
})
