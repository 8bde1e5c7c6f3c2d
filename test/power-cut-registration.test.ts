// A consumer's registration on the power-cut file system (packages/test-support/native/power-cut-fs.c
// states the model): it is committed without flushing the SQLite ledger's log, since no step
// relies on it being durable, and the first full commit after it makes it durable with it.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import { join } from "node:path"
import {
  consumeToEnd,
  diffSnapshots,
  endState,
  generateMessages,
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
      /** Runs a consumer on the mount until `fault` kills it, then cuts everything not durable. */
      const crashThenCut = async (fault: string, boot: string) => {
        await using mount = await mountPowerCut(backing, join(t.path, "cut"))
        const crashed = await startConsume(mount.root, args, { SPOOL_BOOT_ID: boot, SPOOL_FAULT: fault }).finished
        expect(crashed.signalCode, crashed.stderr).toBe("SIGKILL")
        await mount.cut({ kind: "all" })
        await mount.unmount()
      }
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
