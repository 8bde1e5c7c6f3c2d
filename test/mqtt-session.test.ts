// URLs an MQTT source refuses, and what it leaves in the broker's session when its consumer
// dies, against the machine's Mosquitto: a batch killed before its commit was never PUBACKed, so
// the session resumed under the same client id holds every message of it, DUP set; the next run
// finishes it and the session ends empty.
import { it as anywhere, describe, expect } from "bun:test"
import { join } from "node:path"
import { repoRoot, requireServer, snapshot, spool, tempMqttTopic, tempQueue } from "@spool/test-support"

const it = await requireServer("Mosquitto", "127.0.0.1", 1883, "mosquitto -d -c /etc/mosquitto/mosquitto.conf")

const body = (i: number) => `{"msg_id":"k-${i}","order_no":"K","seq":${i + 1},"amount":3.00}`

describe("consume --source mqtt://, told something it cannot use", () => {
  anywhere(
    "refuses a URL without a client id, or asking for a clean session or QoS 0, with exit 2 and why",
    async () => {
      await using q = await tempQueue()
      const base = "mqtt://user:secret@127.0.0.1:1883/?topic=orders/#"
      for (const [query, says] of [
        ["", "names no client id: add &client=NAME, the same on every run"],
        ["&client=c&clean=true", "a clean session forgets what a stopped consumer had not acknowledged"],
        ["&client=c&qos=0", "QoS 0 is never acknowledged"],
      ] as const) {
        const r = await spool("consume", ["--root", q.root, "--source", `${base}${query}`])
        expect(r.stderr).toContain(says)
        expect(r.stderr).not.toContain("secret")
        expect(r.exitCode).toBe(2)
      }
    },
  )
})

describe("consume --source mqtt://, killed", () => {
  for (const step of ["after-claim", "after-commit"])
    it(`${step}: the session keeps the batch unacknowledged, the next run finishes it once`, async () => {
      await using t = await tempMqttTopic()
      const bodies = Array.from({ length: 5 }, (_, i) => body(i))
      await t.publish(bodies)
      await using q = await tempQueue()
      const killed = await spool("consume", ["--root", q.root, "--source", t.url(), "--quiet"], {
        SPOOL_FAULT: step,
      })
      expect(killed.exitCode).toBe(137)
      // Resumed with the same client id and nothing PUBACKed: all five come again, DUP set.
      expect(await t.unacked()).toBe(5)
      expect(t.seen.map((p) => p.payload.toString()).sort()).toEqual(bodies)
      expect(t.seen.every((p) => p.dup)).toBe(true)
      const again = await spool("consume", ["--root", q.root, "--source", t.url(), "--idle-wait", "3s"])
      expect(again.exitCode, again.stderr).toBe(0)
      const s = snapshot(q.root)
      expect((s.processed as { msg_id: string }[]).map((r) => r.msg_id).sort()).toEqual(bodies.map((_, i) => `k-${i}`))
      expect(s.duplicates).toEqual([])
      expect(Object.keys(s.done)).toHaveLength(5)
      expect(s.processing).toEqual({})
      expect(await t.unacked()).toBe(0)
    }, 60_000)
})

describe("consume --source mqtt://, the same bytes published several times", () => {
  it("takes each copy in the next batch at once, not after an idle wait per copy", async () => {
    // Copies land under one name (the body's sha256), so a batch takes one and sets the rest
    // aside for the batches after it. Those batches must not wait --idle-wait for more first:
    // five copies at a 10 s idle wait would take 40 s more. The bound below has 20 s to spare
    // for a loaded machine and still fails such a wait.
    await using t = await tempMqttTopic()
    await t.publish(Array.from({ length: 5 }, () => body(0)))
    await using q = await tempQueue()
    const started = performance.now()
    const r = await spool("consume", ["--root", q.root, "--source", t.url(), "--idle-wait", "10s"])
    const seconds = (performance.now() - started) / 1000
    expect(r.exitCode, r.stderr).toBe(0)
    const s = snapshot(q.root)
    expect((s.processed as { msg_id: string }[]).map((row) => row.msg_id)).toEqual(["k-0"])
    expect(s.duplicates).toHaveLength(4)
    expect(await t.unacked()).toBe(0)
    expect(seconds).toBeLessThan(30)
  }, 120_000)
})

describe("an MQTT delivery whose effect fails, in a library application", () => {
  it("is not PUBACKed by the commit that records the failure: killed there, the session still holds it", async () => {
    // test/apps/refuses.ts throws from its handler, which runs in the commit's transaction; the
    // failure is committed with it, and only after the file has moved to error/ is it PUBACKed.
    await using t = await tempMqttTopic()
    const refused = `{"msg_id":"f-1","order_no":"F","seq":1,"amount":1,"detail":"the ledger of record refused it"}`
    await t.publish([refused])
    await using q = await tempQueue()
    const app = (env: Record<string, string>) =>
      Bun.spawn(["bun", join(repoRoot, "test/apps/refuses.ts"), q.root, t.url()], {
        env: { ...process.env, NO_COLOR: "1", ...env },
        stdout: "pipe",
        stderr: "pipe",
      })
    const killed = app({ SPOOL_FAULT: "after-commit" })
    await killed.exited
    expect(killed.signalCode, await new Response(killed.stderr).text()).toBe("SIGKILL")
    expect(snapshot(q.root).failures).toHaveLength(1)
    expect(await t.unacked()).toBe(1)
    const again = app({})
    expect(await again.exited, await new Response(again.stderr).text()).toBe(0)
    const s = snapshot(q.root)
    expect(s.failures).toHaveLength(1)
    expect(s.processed).toEqual([])
    expect(Object.keys(s.error)).toHaveLength(1)
    expect(s.processing).toEqual({})
    expect(await t.unacked()).toBe(0)
  }, 60_000)
})
