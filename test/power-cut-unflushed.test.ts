// What the SQLite ledger commits without flushing its log, on the power-cut file system
// (packages/test-support/native/power-cut-fs.c states the model): a consumer's registration,
// and the forgetting of a moved file's claim (a run's unregistration). The first full commit
// after either makes it durable; a cut before it brings back what was there before.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  consumeToEnd,
  diffSnapshots,
  endState,
  generateMessages,
  killedThenCut,
  makeQueueFrom,
  missingTest,
  mountPowerCut,
  powerCutUnavailable,
  startConsume,
  tempDir,
} from "@spool/test-support"

const fuseMissing = await powerCutUnavailable()
const fuseIt =
  fuseMissing === undefined ? it : missingTest(fuseMissing, "installs fuse3 and libfuse3-dev and offers /dev/fuse to")

/** Writes a file and makes it and its name durable, as a producer that fsyncs does. */
function writeDurably(path: string, text: string): void {
  const fd = fs.openSync(path, "w")
  try {
    fs.writeSync(fd, text)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  const dir = fs.openSync(join(path, ".."), "r")
  try {
    fs.fsyncSync(dir)
  } finally {
    fs.closeSync(dir)
  }
}

/** The consumers rows and the processed count of the SQLite ledger at `path`. */
function ledgerRows(path: string): { owners: string[]; processed: number } {
  const db = new Database(path, { readonly: true })
  try {
    return {
      owners: (db.query("SELECT boot_id FROM consumers").all() as { boot_id: string }[]).map((r) => r.boot_id),
      processed: (db.query("SELECT count(*) AS n FROM processed").get() as { n: number }).n,
    }
  } finally {
    db.close()
  }
}

describe("a power cut after a consumer registered", () => {
  fuseIt(
    "loses a registration no commit followed, keeps one a commit followed, and the next run ends as a clean one",
    async () => {
      await using t = await tempDir()
      generateMessages(join(t.path, "src"), 100, 41)
      makeQueueFrom(join(t.path, "src"), join(t.path, "reference"))
      await consumeToEnd(join(t.path, "reference"), ["--batch-size", "25"])
      const backing = join(t.path, "cut", "backing")
      makeQueueFrom(join(t.path, "src"), backing)
      const args = ["--batch-size", "25"]
      const crashThenCut = (fault: string, boot: string) =>
        killedThenCut({ backing, state: join(t.path, "cut"), args, env: { SPOOL_BOOT_ID: boot, SPOOL_FAULT: fault } })
      const ledger = join(backing, "ledger.db")
      // The ledger is created (its schema flushed) by the first run; its registration is not.
      await crashThenCut("before-recovery", "registration-boot-1")
      expect(ledgerRows(ledger)).toEqual({ owners: [], processed: 0 })
      // A registration is in the log before its owner's claims, and a commit flushes the log.
      await crashThenCut("after-commit", "registration-boot-2")
      const kept = ledgerRows(ledger)
      expect(kept.owners.map((b) => b.split(" ")[0])).toEqual(["registration-boot-2"])
      expect(kept.processed).toBeGreaterThan(0)
      await using mount = await mountPowerCut(backing, join(t.path, "cut"))
      const r = await startConsume(mount.root, args, { SPOOL_BOOT_ID: "registration-boot-3" }).finished
      expect(r.exitCode, r.stderr).toBe(0)
      const actual = await endState(mount.root)
      await mount.unmount()
      expect(diffSnapshots(await endState(join(t.path, "reference")), actual)).toEqual([])
      expect(actual.processing).toEqual({})
      // The dead owners are forgotten once their claims are taken: only the last run's is gone too.
      expect(ledgerRows(ledger).owners).toEqual([])
    },
    120_000,
  )
})

describe("a power cut after a file of a name already processed was claimed", () => {
  // A watching consumer's drain that processed orders.json forgot its claim on ending,
  // unflushed. Its next drain claims a new orders.json (again unflushed) and renames it into
  // processing/ durably; a cut then brings back the old committed claim, and only what the
  // claim recorded of the old file tells the two apart: the hash of its bytes, or for a file
  // judged unread (here one over --max-bytes) its inode, size and time. (A run that exits
  // flushes all: closing the ledger checkpoints it.)
  const args = ["--max-bytes", "200"]
  const message = (id: string, amount: string, pad = 0) =>
    `{"msg_id":"${id}","order_no":"O-1","seq":${id === "m-1" ? 1 : 2},"amount":${amount}}${" ".repeat(pad)}\n`
  for (const first of ["processed", "judged unread: too large"] as const)
    fuseIt(
      `processes the new file: the earlier file's committed claim (${first}), which the cut brought back, is not taken for it`,
      async () => {
        await using t = await tempDir()
        const backing = join(t.path, "cut", "backing")
        for (const d of ["inbox", "processing", "done", "error", "tmp"])
          fs.mkdirSync(join(backing, d), { recursive: true })
        const firstDest = first === "processed" ? "done" : "error"
        fs.writeFileSync(
          join(backing, "inbox", "orders.json"),
          message("m-1", "10.00", first === "processed" ? 0 : 300),
        )
        await killedThenCut({
          backing,
          state: join(t.path, "cut"),
          args: ["--watch", ...args],
          env: { SPOOL_BOOT_ID: "reuse-boot-1", SPOOL_FAULT: "after-claim@2" },
          during: async (root) => {
            while (!fs.existsSync(join(root, firstDest, "orders.json"))) await Bun.sleep(20)
            // The drain ends (its unregistration) once the move is done; give it that moment.
            await Bun.sleep(300)
            writeDurably(join(root, "inbox", "orders.json"), message("m-2", "20.00"))
          },
        })
        await using mount = await mountPowerCut(backing, join(t.path, "cut"))
        expect(fs.readdirSync(join(mount.root, "processing"))).toEqual(["orders.json"])
        const r = await startConsume(mount.root, args, { SPOOL_BOOT_ID: "reuse-boot-3" }).finished
        expect(r.exitCode, r.stderr).toBe(0)
        expect(r.stderr).toContain("taken as new")
        const db = new Database(join(mount.root, "ledger.db"), { readonly: true })
        const processed = db.query("SELECT msg_id, amount FROM processed ORDER BY msg_id").all()
        const failures = db.query("SELECT file, reason FROM failures").all()
        db.close()
        const done = fs.readdirSync(join(mount.root, "done")).sort()
        const errors = fs.readdirSync(join(mount.root, "error"))
        const processing = fs.readdirSync(join(mount.root, "processing"))
        await mount.unmount()
        if (first === "processed") {
          expect(processed).toEqual([
            { msg_id: "m-1", amount: "10.00" },
            { msg_id: "m-2", amount: "20.00" },
          ])
          expect(done).toHaveLength(2)
          expect(errors).toEqual([])
        } else {
          expect(processed).toEqual([{ msg_id: "m-2", amount: "20.00" }])
          expect(done).toEqual(["orders.json"])
          expect(errors).toEqual(["orders.json"])
          expect(failures).toEqual([{ file: "orders.json", reason: "too-large" }])
        }
        expect(processing).toEqual([])
      },
      120_000,
    )
})
