// consume --source on a Redis stream where a consumer dies for good: another root's consumer of
// the same group takes its pending entries over once they are idle past the lease, and leaves
// nothing pending.
import { expect } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { requireServer, snapshot, spool, tempQueue, tempRedisStream } from "@spool/test-support"

const it = await requireServer("Redis", "127.0.0.1", 6379, "redis-server --daemonize yes --save ''")

const body = (i: number) => `{"msg_id":"k-${i}","order_no":"K","seq":${i + 1},"amount":1.50}`

it("a consumer killed for good has its pending entries taken by another after the lease", async () => {
  await using s = await tempRedisStream(1500)
  const ids = await s.publish(...Array.from({ length: 5 }, (_, i) => body(i)))
  await using dead = await tempQueue()
  await using live = await tempQueue()
  // Killed with the batch landed in its root's processing/, never to run again.
  const killed = await spool("consume", ["--root", dead.root, "--source", s.url, "--quiet"], {
    SPOOL_FAULT: "after-claim",
  })
  expect(killed.exitCode).toBe(137)
  const held = await s.pending()
  expect(held.map((p) => [p.id, p.count])).toEqual(ids.map((id) => [id, 1]))
  expect(new Set(held.map((p) => p.consumer)).size).toBe(1)
  // Another root is another consumer; its drain waits long enough for the lease to pass.
  const r = await spool("consume", ["--root", live.root, "--source", s.url, "--idle-wait", "4s", "--quiet"])
  expect(r.exitCode, r.stderr).toBe(0)
  const done = fs.readdirSync(join(live.root, "done")).sort()
  expect(done).toEqual(ids.map((id) => `redis-${s.stream}-${id}.json`).sort())
  expect(snapshot(live.root).processed).toHaveLength(5)
  expect(snapshot(live.root).failures).toEqual([])
  expect(await s.pending()).toEqual([])
  expect(await s.unacked()).toBe(0)
}, 60_000)
