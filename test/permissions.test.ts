// The ledger and the reports are never world-writable, whatever umask the operator runs with.
// Modes: ledger.db (and its -wal/-shm, which SQLite gives the ledger's mode) 0640; reports
// (dup.txt, error.csv, schema.csv, order-check.sql, order-result.txt, ...) 0644; queue
// directories 0755 minus the umask; files written by enqueue 0644.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot, run, tempDir } from "@spool/test-support"

const slow = 60_000

/** Runs a spool command under umask 000, the worst case for files created without a mode. */
const underUmask000 = (script: string, args: readonly string[]) =>
  run(["sh", "-c", 'umask 000 && exec "$@"', "sh", "bun", join(repoRoot, script), ...args])

const mode = (path: string) => fs.statSync(path).mode & 0o777
const octal = (m: number) => `0${m.toString(8)}`

describe("file permissions", () => {
  it(
    "creates the ledger 0640 and the reports 0644 even under umask 000, and nothing world-writable",
    async () => {
      await using d = await tempDir()
      const root = join(d.path, "q")
      const setup = await underUmask000("packages/consumer/bin/setup.ts", ["--root", root])
      expect(setup.exitCode).toBe(0)
      const msg = join(d.path, "late.json")
      fs.writeFileSync(msg, JSON.stringify({ msg_id: "late", order_no: "o", seq: 99, amount: 1 }))
      const enqueue = await underUmask000("packages/consumer/bin/enqueue.ts", ["--root", root, msg])
      expect(enqueue.exitCode).toBe(0)
      expect(octal(mode(join(root, "inbox", "late.json")))).toBe("0644")
      const schema = await underUmask000("packages/consumer/bin/schema.ts", ["--root", root])
      expect(schema.exitCode).toBe(0)
      const consume = await underUmask000("packages/consumer/bin/consume.ts", ["--root", root])
      expect(consume.exitCode).toBe(0)
      await underUmask000("packages/consumer/bin/order-check.ts", ["--root", root])

      expect(octal(mode(join(root, "ledger.db")))).toBe("0640")
      for (const report of ["dup.txt", "error.csv", "schema.csv", "order-check.sql", "order-result.txt"])
        expect([report, octal(mode(join(root, report)))]).toEqual([report, "0644"])
      for (const dir of ["inbox", "processing", "done", "error", "tmp"])
        expect([dir, octal(mode(join(root, dir)))]).toEqual([dir, "0755"])
      for (const entry of fs.readdirSync(root)) expect([entry, mode(join(root, entry)) & 0o002]).toEqual([entry, 0])
    },
    slow,
  )

  it(
    "gives the ledger's -wal and -shm files the ledger's own mode",
    async () => {
      await using d = await tempDir()
      const root = join(d.path, "q")
      expect((await underUmask000("packages/consumer/bin/setup.ts", ["--root", root])).exitCode).toBe(0)
      expect((await underUmask000("packages/consumer/bin/consume.ts", ["--root", root])).exitCode).toBe(0)
      // A reader holding the ledger open keeps the -wal and -shm files in place after consume exits.
      const reader = new Database(join(root, "ledger.db"), { readonly: true })
      try {
        reader.query("SELECT count(*) FROM processed").get()
        expect((await underUmask000("packages/consumer/bin/consume.ts", ["--root", root])).exitCode).toBe(0)
        for (const f of ["ledger.db-wal", "ledger.db-shm"]) expect([f, octal(mode(join(root, f)))]).toEqual([f, "0640"])
      } finally {
        reader.close()
      }
    },
    slow,
  )
})

const canSwitchUser = process.getuid?.() === 0 && Bun.which("setpriv") !== null
if (!canSwitchUser) console.warn("permissions.test: skipping the other-user test: it needs root and setpriv")

describe.skipIf(!canSwitchUser)("a message file the consumer may not read", () => {
  it.each([[[]], [["--one-thread"]]])(
    "goes to error/ as unreadable, saying whose it is and what to do, and the queue goes on (%p)",
    async (more: string[]) => {
      await using d = await tempDir()
      fs.chmodSync(d.path, 0o755)
      Bun.spawnSync(["chown", "65534:65534", d.path])
      const root = join(d.path, "q")
      const asNobody = (script: string, args: readonly string[]) =>
        run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bun", join(repoRoot, script), ...args])
      expect((await asNobody("packages/consumer/bin/setup.ts", ["--root", root])).exitCode).toBe(0)
      const put = (name: string, seq: number) =>
        fs.writeFileSync(join(root, "inbox", name), JSON.stringify({ msg_id: name, order_no: "o", seq, amount: 1 }))
      for (const [i, name] of ["k1.json", "k2.json", "k3.json", "k4.json"].entries()) put(name, i + 1)
      // Written by another user (here root, whom nobody cannot impersonate) with umask 077.
      fs.chmodSync(join(root, "inbox", "k3.json"), 0o600)
      for (const name of ["k1.json", "k2.json", "k4.json"])
        Bun.spawnSync(["chown", "65534:65534", join(root, "inbox", name)])
      const r = await asNobody("packages/consumer/bin/consume.ts", ["--root", root, "--batch-size", "2", ...more])
      expect(r.exitCode, r.stderr).toBe(0)
      expect(fs.readdirSync(join(root, "done")).sort()).toEqual(["k1.json", "k2.json", "k4.json"])
      expect(fs.readdirSync(join(root, "error"))).toEqual(["k3.json"])
      expect(fs.readdirSync(join(root, "processing"))).toEqual([])
      const db = new Database(join(root, "ledger.db"), { readonly: true })
      const failure = db.query("SELECT reason, detail FROM failures WHERE file = 'k3.json'").get()
      db.close()
      expect(failure).toEqual({
        reason: "unreadable",
        detail:
          "EACCES: the consumer, running as nobody (uid 65534), may not read it, owned by root (uid 0) with mode 0600; make it readable (chmod o+r or chown nobody, or have the producer write it so), then replay it",
      })
      // Made readable and replayed, it is processed as it is.
      fs.chmodSync(join(root, "error", "k3.json"), 0o644)
      expect((await asNobody("scripts/replay.ts", ["--root", root, "k3.json"])).exitCode).toBe(0)
      expect((await asNobody("packages/consumer/bin/consume.ts", ["--root", root, ...more])).exitCode).toBe(0)
      expect(fs.readdirSync(join(root, "done")).sort()).toEqual(["k1.json", "k2.json", "k3.json", "k4.json"])
    },
    slow,
  )

  it(
    "is poison, known by its identity, when the consumer died with it in hand at every attempt",
    async () => {
      await using d = await tempDir()
      fs.chmodSync(d.path, 0o755)
      Bun.spawnSync(["chown", "65534:65534", d.path])
      const root = join(d.path, "q")
      const asNobody = (args: readonly string[], env: Record<string, string> = {}) =>
        run(
          [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "bun",
            join(repoRoot, "packages/consumer/bin/consume.ts"),
            "--root",
            root,
            ...args,
          ],
          { env },
        )
      expect(
        (
          await run([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "bun",
            join(repoRoot, "packages/consumer/bin/setup.ts"),
            "--root",
            root,
          ])
        ).exitCode,
      ).toBe(0)
      fs.writeFileSync(join(root, "inbox", "a.json"), JSON.stringify({ msg_id: "a", order_no: "o", seq: 1, amount: 1 }))
      fs.chmodSync(join(root, "inbox", "a.json"), 0o600)
      for (const fault of ["after-claim", "in-commit", "in-commit"])
        expect((await asNobody([], { SPOOL_FAULT: fault })).exitCode).not.toBe(0)
      const r = await asNobody([])
      expect(r.stderr).not.toContain("unexpected failure")
      expect(r.exitCode, r.stderr).toBe(0)
      expect(fs.readdirSync(join(root, "error"))).toEqual(["a.json"])
      expect(fs.readdirSync(join(root, "processing"))).toEqual([])
    },
    slow,
  )
})
