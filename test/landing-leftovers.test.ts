// A consumer killed while it lands a batch (claims committed, bodies written under tmp/, not yet
// renamed into processing/) leaves `tmp/<claimId>.land` files behind. The next run's recovery
// removes them, and the broker's redelivery is processed once; a live consumer's landing files,
// stopped at the same instant, are left alone by another consumer's recovery.
import { expect } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { isStopped, repoRoot, requireServer, snapshot, spool, tempJetStream, tempQueue } from "@spool/test-support"

const nats = await requireServer("NATS", "127.0.0.1", 4222, "nats-server -js -a 127.0.0.1 -p 4222")

const bodies = Array.from({ length: 3 }, (_, i) =>
  JSON.stringify({ msg_id: `l-${i}`, order_no: "L", seq: i + 1, amount: 1 }),
)
const landings = (root: string) => fs.readdirSync(join(root, "tmp")).filter((n) => n.endsWith(".land"))

nats(
  "a consumer killed mid-landing leaves tmp/ files that the next run removes, and the redelivery is processed once",
  async () => {
    await using stream = await tempJetStream(1000)
    await stream.publish(...bodies)
    await using q = await tempQueue()
    const killed = await spool("consume", ["--root", q.root, "--source", stream.url, "--quiet"], {
      SPOOL_FAULT: "after-land-write",
    })
    expect(killed.exitCode).toBe(137)
    expect(landings(q.root)).toHaveLength(3)
    const again = await spool("consume", ["--root", q.root, "--source", stream.url, "--idle-wait", "3s"])
    expect(again.exitCode, again.stderr).toBe(0)
    expect(again.stderr).toContain("landed under tmp/, never renamed")
    expect(landings(q.root)).toEqual([])
    const s = snapshot(q.root)
    expect((s.processed as { msg_id: string }[]).map((r) => r.msg_id).sort()).toEqual(["l-0", "l-1", "l-2"])
    expect(s.duplicates).toEqual([])
    expect(s.claims).toEqual([])
    expect(Object.keys(s.done)).toHaveLength(3)
    expect(await stream.unacked()).toBe(0)
  },
  60_000,
)

nats(
  "a live consumer's landing files are left alone by another consumer's recovery",
  async () => {
    // ack_wait outlasts the test: the stopped consumer's deliveries stay its own meanwhile.
    await using stream = await tempJetStream(60_000)
    await stream.publish(...bodies)
    await using q = await tempQueue()
    const a = Bun.spawn(
      ["bun", join(repoRoot, "packages/consumer/bin/consume.ts"), "--root", q.root, "--source", stream.url, "--quiet"],
      {
        env: { ...process.env, NO_COLOR: "1", SPOOL_FAULT: "after-land-write", SPOOL_FAULT_SIGNAL: "SIGSTOP" },
        stdout: "pipe",
        stderr: "pipe",
      },
    )
    try {
      for (const deadline = Date.now() + 30_000; !isStopped(a.pid); await Bun.sleep(10))
        if (a.exitCode !== null || Date.now() > deadline) throw new Error("consume never stopped mid-landing")
      const written = landings(q.root)
      expect(written).toHaveLength(3)
      const b = await spool("consume", ["--root", q.root, "--source", stream.url, "--idle-wait", "1s"])
      expect(b.exitCode, b.stderr).toBe(0)
      expect(b.stderr).not.toContain("landed under tmp/")
      expect(landings(q.root)).toEqual(written)
    } finally {
      a.kill("SIGCONT")
    }
    expect(await a.exited).toBe(0)
    expect(landings(q.root)).toEqual([])
    const s = snapshot(q.root)
    expect((s.processed as { msg_id: string }[]).map((r) => r.msg_id).sort()).toEqual(["l-0", "l-1", "l-2"])
    expect(s.duplicates).toEqual([])
    expect(await stream.unacked()).toBe(0)
  },
  60_000,
)
