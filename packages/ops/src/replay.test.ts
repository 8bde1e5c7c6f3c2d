import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { createQueue, Ledger, type Queue, SpoolError } from "@spool/core"
import { checkReplayable, checkReplayName, moveAndMark, replayFile } from "./replay.ts"

const NOW = new Date("2026-11-29T10:00:00.000Z")

interface TempQueue extends AsyncDisposable {
  readonly dir: string
  readonly queue: Queue
  readonly ledger: Ledger
}

/** A queue whose error/ holds bad.json with a failure record (reason parse), as consume leaves it. */
async function failedQueue(): Promise<TempQueue> {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-replay-"))
  const queue = createQueue(join(dir, "q"))
  const ledger = Ledger.open(queue.ledger, { durable: false })
  ledger.commit(
    [
      {
        kind: "rejected",
        name: "bad.json",
        claimId: "c1",
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

function ledgerState(ledger: Ledger) {
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
    const r = replayFile(t.queue, t.ledger, "bad.json", NOW)
    expect(r).toEqual({ file: "bad.json", reason: "parse", isRecordMarked: true })
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
    expect(replayFile(t.queue, t.ledger, "dropped-by-hand.json", NOW).isRecordMarked).toBe(false)
    expect(ledgerState(t.ledger).replays).toEqual([
      { file: "dropped-by-hand.json", failure_id: null, replayed_at: NOW.toISOString() },
    ])
  })

  it("rolls the ledger back when a file of the same name lands in inbox/ after the checks", async () => {
    await using t = await failedQueue()
    const before = ledgerState(t.ledger)
    // The checks passed earlier; the producer's file arrives just before the move.
    fs.writeFileSync(join(t.queue.inbox, "bad.json"), "producer's")
    const e = refusal(() => moveAndMark(t.queue, t.ledger, "bad.json", NOW))
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
    expect(refusal(() => moveAndMark(t.queue, t.ledger, "bad.json", NOW)).code).toBe("refused")
    expect(ledgerState(t.ledger)).toEqual(before)
    expect(fs.readdirSync(t.queue.inbox)).toEqual([])
  })
})
