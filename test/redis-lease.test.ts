// A Redis Streams batch whose synchronous handler, on the SQLite ledger, holds the consumer's main
// thread longer than the lease, with another consumer of the group running XAUTOCLAIM meanwhile:
// the source's keeper thread keeps the entries' idle time below the lease, so the other consumer
// takes none of them, and each entry is delivered once.
import { Database } from "bun:sqlite"
import { expect } from "bun:test"
import { join } from "node:path"
import { repoRoot, requireServer, run, tempQueue, tempRedisStream } from "@spool/test-support"

const redis = await requireServer("Redis", "127.0.0.1", 6379, "redis-server --daemonize yes --save ''")

redis(
  "a synchronous handler outlasting the lease on the SQLite ledger keeps its entries from another consumer",
  async () => {
    const leaseMs = 3000
    await using s = await tempRedisStream(leaseMs)
    const count = 3
    const ids = await s.publish(
      ...Array.from({ length: count }, (_, i) =>
        JSON.stringify({ msg_id: `b-${i}`, order_no: "B", seq: i + 1, amount: 1 }),
      ),
    )
    await using q = await tempQueue()
    // The first message holds the consumer's main thread for more than two leases.
    let isRunning = true
    const consuming = run(["bun", join(repoRoot, "test/apps/busy-handler.ts"), q.root], {
      env: { SOURCE: s.url, BUSY_MS: "7000", BUSY_SEQ: "1" },
    }).finally(() => {
      isRunning = false
    })
    const deadline = Date.now() + 30_000
    while ((await s.pending()).length < count && Date.now() < deadline) await Bun.sleep(20)
    expect((await s.pending()).map((p) => p.id)).toEqual(ids)
    // Another consumer of the group claims whatever has been idle past the lease, as a second
    // spool consumer would, until the first one is done.
    const stolen: string[] = []
    while (isRunning) {
      const [, entries] = (await s.client.call(
        ...["XAUTOCLAIM", s.stream, s.group, "thief", String(leaseMs), "0-0", "COUNT", "100"],
      )) as [string, [string, unknown][]]
      stolen.push(...entries.map(([id]) => id))
      await Bun.sleep(100)
    }
    const r = await consuming
    expect(stolen).toEqual([])
    expect(r.stderr).not.toContain("keeper-failed")
    expect(r.exitCode, r.stderr).toBe(0)
    const summary = JSON.parse(r.stdout) as Record<string, number>
    expect(summary).toMatchObject({ processed: count, duplicates: 0, redelivered: 0 })
    expect(await s.pending()).toEqual([])
    expect(await s.unacked()).toBe(0)
    using db = new Database(join(q.root, "ledger.db"), { readonly: true })
    expect(db.query("SELECT count(*) AS n FROM processed").get()).toEqual({ n: count })
    expect(db.query("SELECT count(*) AS n FROM duplicates").get()).toEqual({ n: 0 })
    expect(db.query("SELECT count(DISTINCT msg_id) AS d, count(*) AS n FROM applied").get()).toEqual({
      d: count,
      n: count,
    })
  },
  60_000,
)
