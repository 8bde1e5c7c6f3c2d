import { afterEach, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { hostname, tmpdir } from "node:os"
import { join } from "node:path"
import { collectGarbageEvery } from "../collect.ts"
import type { Outcome } from "../ledger/model.ts"
import { type Effect, SqliteLedger } from "../ledger/sqlite/ledger.ts"
import { currentOwner, type Owner, processStartTicks } from "../queue/owner.ts"
import { createQueue, type Queue } from "../queue/root.ts"
import { consume } from "./engine.ts"

const NOW = new Date().toISOString()
const cleanups: (() => void)[] = []
afterEach(() => {
  for (const c of cleanups.splice(0)) c()
})

/** A queue and its ledger, removed after the test. */
function tempQueue(files: Record<string, object | string>): { q: Queue; ledger: SqliteLedger } {
  const dir = fs.mkdtempSync(join(tmpdir(), "spool-consumer-"))
  const q = createQueue(join(dir, "q"))
  for (const [name, v] of Object.entries(files))
    fs.writeFileSync(join(q.inbox, name), typeof v === "string" ? v : JSON.stringify(v))
  const ledger = SqliteLedger.open(q.ledger, { durable: false })
  cleanups.push(() => {
    ledger.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  return { q, ledger }
}

const msg = (id: string, seq = 1) => ({ msg_id: id, order_no: "A", seq, amount: 1.5 })

/** A process that sleeps until killed: a stand-in for another consumer. */
function sleeper() {
  const proc = Bun.spawn(["sleep", "1000"], { stdout: "ignore", stderr: "ignore" })
  cleanups.push(() => proc.kill("SIGKILL"))
  return proc
}

function ownerOf(pid: number, overrides: Partial<Owner> = {}): Owner {
  return {
    ownerId: `ghost${pid}`,
    host: hostname(),
    pid,
    bootId: currentOwner().bootId,
    startTicks: processStartTicks(pid) ?? "gone",
    ...overrides,
  }
}

/**
 * Leaves the queue as a consumer that died mid-batch would: `claimed` files claimed and moved
 * to processing/, `committed` ones also committed (not yet moved), `unmoved` claimed only.
 */
function leaveClaims(
  { q, ledger }: { q: Queue; ledger: SqliteLedger },
  owner: Owner,
  files: { claimed?: string[]; committed?: string[]; unmoved?: string[] },
) {
  ledger.registerConsumer(owner, NOW)
  const names = [...(files.claimed ?? []), ...(files.committed ?? []), ...(files.unmoved ?? [])]
  const claims = ledger.claim(owner.ownerId, names, NOW)
  for (const c of claims)
    if (!files.unmoved?.includes(c.name)) fs.renameSync(join(q.inbox, c.name), join(q.processing, c.name))
  const outcomes = claims
    .filter((c) => files.committed?.includes(c.name))
    .map((c): Outcome => {
      const text = fs.readFileSync(join(q.processing, c.name), "utf8")
      const m = JSON.parse(text)
      const hash = new Bun.CryptoHasher("sha256").update(text).digest("hex")
      return {
        kind: "accepted",
        name: c.name,
        claimId: c.claimId,
        msgId: m.msg_id,
        orderNo: m.order_no,
        seq: m.seq,
        amount: String(m.amount),
        hash,
        contentHash: hash,
        message: m,
      }
    })
  ledger.commit(owner.ownerId, outcomes, NOW)
  return claims
}

const ls = (dir: string) => fs.readdirSync(dir).sort()
const rows = (ledger: SqliteLedger, sql: string) => ledger.db.query(sql).all()

describe("recovery of a dead consumer's claims", () => {
  it("processes its uncommitted files again, only moves its committed ones, and forgets the rest", async () => {
    const t = tempQueue({ "a.json": msg("id-a"), "b.json": msg("id-b", 2), "c.json": msg("id-c", 3) })
    const ghost = sleeper()
    const claims = leaveClaims(t, ownerOf(ghost.pid), {
      claimed: ["a.json"],
      committed: ["b.json"],
      unmoved: ["c.json"],
    })
    ghost.kill("SIGKILL")
    await ghost.exited

    const summary = await consume({ queue: t.q, ledger: t.ledger })
    expect(summary.recovered).toBe(2)
    expect(ls(t.q.done)).toEqual(["a.json", "b.json", "c.json"])
    expect(ls(t.q.processing)).toEqual([])
    // b was committed by the dead consumer: moved, not processed again, so not a duplicate.
    expect(rows(t.ledger, "SELECT msg_id, claim_id FROM processed WHERE file = 'b.json'")).toEqual([
      { msg_id: "id-b", claim_id: claims.find((c) => c.name === "b.json")?.claimId },
    ])
    expect(rows(t.ledger, "SELECT * FROM duplicates")).toEqual([])
    expect(rows(t.ledger, "SELECT msg_id FROM processed ORDER BY msg_id")).toHaveLength(3)
    expect(rows(t.ledger, "SELECT * FROM claims")).toEqual([])
  })

  it("leaves alone the claims of a consumer that is still running, and takes them once it is gone", async () => {
    const t = tempQueue({ "a.json": msg("id-a"), "b.json": msg("id-b", 2), "c.json": msg("id-c", 3) })
    const ghost = sleeper()
    const owner = ownerOf(ghost.pid)
    leaveClaims(t, owner, { claimed: ["a.json"], committed: ["b.json"] })

    const first = await consume({ queue: t.q, ledger: t.ledger })
    expect(first.recovered).toBe(0)
    expect(ls(t.q.processing)).toEqual(["a.json", "b.json"])
    expect(ls(t.q.done)).toEqual(["c.json"])
    expect(rows(t.ledger, "SELECT name, owner_id FROM claims ORDER BY name")).toEqual([
      { name: "a.json", owner_id: owner.ownerId },
      { name: "b.json", owner_id: owner.ownerId },
    ])

    ghost.kill("SIGKILL")
    await ghost.exited
    const second = await consume({ queue: t.q, ledger: t.ledger })
    expect(second.recovered).toBe(2)
    expect(ls(t.q.done)).toEqual(["a.json", "b.json", "c.json"])
    expect(rows(t.ledger, "SELECT * FROM claims")).toEqual([])
  })

  it("counts an owner whose pid now belongs to a process started at another time as dead", async () => {
    const t = tempQueue({ "a.json": msg("id-a") })
    // Our own pid, alive, but with another start time: the pid was reused.
    leaveClaims(t, ownerOf(process.pid, { ownerId: "reused", startTicks: "1" }), { claimed: ["a.json"] })
    expect((await consume({ queue: t.q, ledger: t.ledger })).recovered).toBe(1)
    expect(ls(t.q.done)).toEqual(["a.json"])
  })

  it("counts an owner that is a zombie (killed, not yet reaped) as dead", async () => {
    const t = tempQueue({ "a.json": msg("id-a") })
    // sh starts a sleeping child, then becomes `sleep` itself, which never reaps that child.
    const parent = Bun.spawn(["sh", "-c", "sleep 1000 & echo $!; exec sleep 1000"], { stdout: "pipe" })
    cleanups.push(() => parent.kill("SIGKILL"))
    const reader = parent.stdout.getReader()
    let out = ""
    while (!out.includes("\n")) {
      const { value, done } = await reader.read()
      if (done) break
      out += new TextDecoder().decode(value)
    }
    const pid = Number(out.trim())
    // Kill the child only once sh has become `sleep`: sh itself might still reap it.
    const comm = () => fs.readFileSync(`/proc/${parent.pid}/comm`, "utf8").trim()
    for (let i = 0; i < 500 && comm() !== "sleep"; i++) await Bun.sleep(10)
    expect(comm()).toBe("sleep")
    leaveClaims(t, ownerOf(pid), { claimed: ["a.json"] })
    process.kill(pid, "SIGKILL")
    const state = () => fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0]
    for (let i = 0; i < 500 && state() !== "Z"; i++) await Bun.sleep(10)
    expect(state()).toBe("Z")

    expect((await consume({ queue: t.q, ledger: t.ledger })).recovered).toBe(1)
    expect(ls(t.q.done)).toEqual(["a.json"])
  })

  it("judges a consumer in another pid namespace of this host (a container sharing its hostname) by its heartbeat", async () => {
    const t = tempQueue({ "a.json": msg("id-a") })
    // A pid that means nothing here: gone in this namespace, which says nothing about another.
    const ghost = sleeper()
    ghost.kill("SIGKILL")
    await ghost.exited
    const boot = currentOwner().bootId.split(" ")[0] ?? ""
    const contained = ownerOf(ghost.pid, { ownerId: "contained", bootId: `${boot} pid:[1]` })
    leaveClaims(t, contained, { claimed: ["a.json"] })
    t.ledger.db.run("UPDATE consumers SET heartbeat_at = ? WHERE owner_id = 'contained'", [new Date().toISOString()])
    expect((await consume({ queue: t.q, ledger: t.ledger, leaseMs: 60_000 })).recovered).toBe(0)
    expect(ls(t.q.processing)).toEqual(["a.json"])
    // Nor is its row deleted as a dead consumer's would be.
    expect(t.ledger.listConsumers().map((o) => o.ownerId)).toEqual(["contained"])

    const old = new Date(Date.now() - 120_000).toISOString()
    t.ledger.db.run("UPDATE consumers SET heartbeat_at = ? WHERE owner_id = 'contained'", [old])
    expect((await consume({ queue: t.q, ledger: t.ledger, leaseMs: 60_000 })).recovered).toBe(1)
    expect(ls(t.q.done)).toEqual(["a.json"])
  })

  it("judges an owner recorded without a pid namespace (an older spool) by its pid, as before", async () => {
    const t = tempQueue({ "a.json": msg("id-a") })
    const boot = currentOwner().bootId.split(" ")[0] ?? ""
    leaveClaims(t, ownerOf(process.pid, { ownerId: "old", bootId: boot, startTicks: "1" }), { claimed: ["a.json"] })
    expect((await consume({ queue: t.q, ledger: t.ledger })).recovered).toBe(1)
    expect(ls(t.q.done)).toEqual(["a.json"])
    expect(t.ledger.listConsumers()).toEqual([])
  })

  it("judges another host's consumer by its heartbeat", async () => {
    const t = tempQueue({ "a.json": msg("id-a") })
    const remote = ownerOf(process.pid, { ownerId: "remote", host: "another-host" })
    leaveClaims(t, remote, { claimed: ["a.json"] })
    t.ledger.db.run("UPDATE consumers SET heartbeat_at = ? WHERE owner_id = 'remote'", [new Date().toISOString()])
    expect((await consume({ queue: t.q, ledger: t.ledger, leaseMs: 60_000 })).recovered).toBe(0)
    expect(ls(t.q.processing)).toEqual(["a.json"])

    const old = new Date(Date.now() - 120_000).toISOString()
    t.ledger.db.run("UPDATE consumers SET heartbeat_at = ? WHERE owner_id = 'remote'", [old])
    expect((await consume({ queue: t.q, ledger: t.ledger, leaseMs: 60_000 })).recovered).toBe(1)
    expect(ls(t.q.done)).toEqual(["a.json"])
  })
})

describe("recovery of an owner that commits after the claims were listed", () => {
  it("moves the files it committed, in the state the takeover finds, and never processes them again", async () => {
    const t = tempQueue({ "a.json": msg("id-a"), "b.json": "{ not json" })
    // The owner is dead by the time it is judged; between the listing and that judgement it
    // commits (a consumer that was stopped, resumed, committed, and failed before its move).
    const ghost = sleeper()
    ghost.kill("SIGKILL")
    await ghost.exited
    const owner = ownerOf(ghost.pid)
    const claims = leaveClaims(t, owner, { claimed: ["a.json", "b.json"] })
    const [a, b] = claims as [(typeof claims)[0], (typeof claims)[0]]
    const text = fs.readFileSync(join(t.q.processing, "a.json"), "utf8")
    const hash = new Bun.CryptoHasher("sha256").update(text).digest("hex")
    const committedLate: Outcome[] = [
      {
        kind: "accepted",
        name: "a.json",
        claimId: a.claimId,
        msgId: "id-a",
        orderNo: "A",
        seq: 1,
        amount: "1.5",
        hash,
        contentHash: hash,
        message: msg("id-a"),
      },
      {
        kind: "rejected",
        name: "b.json",
        claimId: b.claimId,
        destName: "b.json",
        reason: "parse",
        detail: "bad",
        hash: null,
      },
    ]
    let listings = 0
    const ledger = new Proxy(t.ledger, {
      get(target, key) {
        if (key === "listClaims")
          return () => {
            const listed = target.listClaims()
            if (listings++ === 0) target.commit(owner.ownerId, committedLate, NOW)
            return listed
          }
        const value = Reflect.get(target, key)
        return typeof value === "function" ? value.bind(target) : value
      },
    })

    const summary = await consume({ queue: t.q, ledger })
    expect(summary.recovered).toBe(2)
    expect(summary.processed + summary.duplicates + summary.rejected).toBe(0)
    expect(ls(t.q.done)).toEqual(["a.json"])
    expect(ls(t.q.error)).toEqual(["b.json"])
    expect(ls(t.q.processing)).toEqual([])
    expect(rows(t.ledger, "SELECT msg_id, claim_id FROM processed")).toEqual([{ msg_id: "id-a", claim_id: a.claimId }])
    expect(rows(t.ledger, "SELECT * FROM duplicates")).toEqual([])
    expect(rows(t.ledger, "SELECT file, reason, claim_id FROM failures")).toEqual([
      { file: "b.json", reason: "parse", claim_id: b.claimId },
    ])
    expect(rows(t.ledger, "SELECT * FROM claims")).toEqual([])
  })
})

describe("a consumer stalled between its commit and its move for longer than its lease", () => {
  for (const pipeline of [false, true])
    it(`moves nothing whose claim was taken over, not even a new delivery of the same name (${pipeline ? "pipelined" : "one thread"})`, async () => {
      const t = tempQueue({ "a.json": msg("id-a"), "b.json": msg("id-b", 2) })
      // Right after this consumer's commit, before its move, and while it is stalled: another
      // consumer takes its claims over (its heartbeat looked stale), moves the files and ends
      // the claims; then a new delivery of a.json is claimed into processing/ by a third one.
      let isFirst = true
      const ledger = new Proxy(t.ledger, {
        get(target, key) {
          if (key === "commit")
            return (...args: Parameters<SqliteLedger["commit"]>) => {
              const verdicts = target.commit(...args)
              if (!isFirst) return verdicts
              isFirst = false
              for (const o of args[1]) {
                target.db.run("UPDATE claims SET owner_id = 'adopter' WHERE name = ?", [o.name])
                fs.renameSync(join(t.q.processing, o.name), join(t.q.done, o.name))
                target.db.run("DELETE FROM claims WHERE name = ?", [o.name])
              }
              fs.writeFileSync(join(t.q.processing, "a.json"), JSON.stringify(msg("id-a-new", 3)))
              target.db.run(
                "INSERT INTO claims (name, claim_id, owner_id, attempts, state, claimed_at) VALUES ('a.json', 'third.0', 'third', 1, 'claimed', ?)",
                [NOW],
              )
              // The stall, longer than a quarter of the 200 ms lease: once the commit has returned
              // (the caller's continuation runs first, then this), before anything is moved.
              queueMicrotask(() => queueMicrotask(() => Bun.sleepSync(80)))
              return verdicts
            }
          const value = Reflect.get(target, key)
          return typeof value === "function" ? value.bind(target) : value
        },
      })
      await consume({ queue: t.q, ledger, leaseMs: 200, batchSize: 2, pipeline })
      // The new delivery is untouched, in processing/ with its own claim; done/ has the two files
      // the adopter moved, each once.
      expect(ls(t.q.processing)).toEqual(["a.json"])
      expect(JSON.parse(fs.readFileSync(join(t.q.processing, "a.json"), "utf8")).msg_id).toBe("id-a-new")
      expect(ls(t.q.done)).toEqual(["a.json", "b.json"])
      expect(rows(t.ledger, "SELECT name, owner_id FROM claims")).toEqual([{ name: "a.json", owner_id: "third" }])
    })
})

describe("the poison counter", () => {
  it("sends a file claimed maxAttempts times to error/ as poison, unjudged (only hashed), and not its batch-mates", async () => {
    const t = tempQueue({ "p.json": msg("id-p"), "q.json": msg("id-q", 2) })
    const hash = Bun.CryptoHasher.hash("sha256", fs.readFileSync(join(t.q.inbox, "p.json")), "hex")
    leaveClaims(t, ownerOf(process.pid, { ownerId: "dead", startTicks: "1" }), { claimed: ["p.json", "q.json"] })
    // The counter lives in the ledger: as a restart finds it after p crashed three consumers.
    t.ledger.db.run("UPDATE claims SET attempts = 3 WHERE name = 'p.json'")

    const summary = await consume({ queue: t.q, ledger: t.ledger, maxAttempts: 3 })
    expect(summary.rejectedBy).toEqual({ poison: 1 })
    expect(ls(t.q.error)).toEqual(["p.json"])
    expect(ls(t.q.done)).toEqual(["q.json"])
    expect(rows(t.ledger, "SELECT file, reason, detail, payload_hash FROM failures")).toEqual([
      {
        file: "p.json",
        reason: "poison",
        detail: "no commit in 3 attempts; the consumer died with it alone in hand on the last",
        payload_hash: hash,
      },
    ])
  })

  it("retries a file below the limit, counting the attempt in the ledger before judging it", async () => {
    const t = tempQueue({ "p.json": msg("id-p") })
    leaveClaims(t, ownerOf(process.pid, { ownerId: "dead", startTicks: "1" }), { claimed: ["p.json"] })
    t.ledger.db.run("UPDATE claims SET attempts = 2 WHERE name = 'p.json'")
    const seen: unknown[] = []
    await consume({
      queue: t.q,
      ledger: t.ledger,
      maxAttempts: 3,
      effect: ((o, db) => {
        seen.push(db.query("SELECT attempts FROM claims WHERE name = ?").get(o.name))
      }) satisfies Effect,
    })
    expect(seen).toEqual([{ attempts: 3 }])
    expect(ls(t.q.done)).toEqual(["p.json"])
  })

  it("never poisons a file that only ever crashed inside a batch, even with maxAttempts 1", async () => {
    const t = tempQueue({ "p.json": msg("id-p") })
    leaveClaims(t, ownerOf(process.pid, { ownerId: "dead", startTicks: "1" }), { claimed: ["p.json"] })
    await consume({ queue: t.q, ledger: t.ledger, maxAttempts: 1 })
    expect(ls(t.q.done)).toEqual(["p.json"])
  })
})

describe("collectGarbageEvery", () => {
  /** Runs consume on seven files in batches of two; the collections it asks for, "eden" or "full", in order. */
  async function collections(every: number, fullEvery?: number): Promise<string[]> {
    const files = Object.fromEntries(Array.from({ length: 7 }, (_, i) => [`m${i}.json`, msg(`id-${i}`, i + 1)]))
    const t = tempQueue(files)
    const gc = Bun.gc
    const asked: string[] = []
    Bun.gc = (force?: boolean) => {
      asked.push(force ? "full" : "eden")
      return gc(force)
    }
    collectGarbageEvery(every, fullEvery)
    try {
      await consume({ queue: t.q, ledger: t.ledger, batchSize: 2, pipeline: false })
    } finally {
      collectGarbageEvery(0)
      Bun.gc = gc
    }
    expect(ls(t.q.done)).toHaveLength(7)
    return asked
  }

  it("collects after every so many files moved out, and never when off (the default)", async () => {
    expect(await collections(0)).toEqual([])
    // Batches of 2, 2, 2 and 1 files: with 3, a collection after the second batch (4 files
    // since none) and after the fourth (3 since the last).
    expect(await collections(3)).toEqual(["full", "full"])
    expect(await collections(1)).toEqual(["full", "full", "full", "full"])
  })

  it("makes every collection young but one per so many files full", async () => {
    // After each batch, young; full once 4 files have been moved since the last full one: after
    // the second batch (4), not after the fourth (3 since).
    expect(await collections(1, 4)).toEqual(["eden", "full", "eden", "eden"])
    expect(await collections(1, 3)).toEqual(["eden", "full", "eden", "full"])
    // Every 2 files, young only: the last batch (1 file) asks for none.
    expect(await collections(2, 100)).toEqual(["eden", "eden", "eden"])
  })
})

describe("the hand-back after a fatal error, past the move guard", () => {
  it("leaves alone a committed file whose claim was taken over: the name in processing/ is another delivery now", async () => {
    // a-bad.json (to error/) and b.json (to done/), committed together. Then, as if this
    // consumer had stalled past its lease: another took b.json's claim over, moved it to done/,
    // and a new delivery of b.json sits in processing/ under that other consumer's claim. And
    // error/ is gone, so the move of a-bad.json, the batch's first, fails the run.
    const { q, ledger } = tempQueue({ "a-bad.json": "{not json", "b.json": msg("id-b") })
    const newDelivery = JSON.stringify(msg("id-b2"))
    const onCommit = async () => {
      fs.copyFileSync(join(q.processing, "b.json"), join(q.done, "b.json"))
      fs.writeFileSync(join(q.processing, "b.json"), newDelivery)
      ledger.db.run(
        "UPDATE claims SET owner_id = 'other', claim_id = 'other.1', state = 'claimed' WHERE name = 'b.json'",
      )
      fs.rmdirSync(q.error)
      // A lease of 4 ms: its move guard (a quarter of it) has passed when the moves begin, and
      // when the hand-back comes, however fast this machine (a takeover inside the guard
      // cannot happen: the lease is four times as long).
      await Bun.sleep(10)
    }
    const run = consume({ queue: q, ledger, batchSize: 2, pipeline: false, leaseMs: 4, onCommit })
    await expect(run).rejects.toThrow(/does not exist/)
    fs.mkdirSync(q.error)
    // The other consumer's delivery is still in processing/, under its claim; done/ has only
    // the b.json this consumer committed (moved there by the other).
    expect(fs.readFileSync(join(q.processing, "b.json"), "utf8")).toBe(newDelivery)
    expect(fs.readdirSync(q.done)).toEqual(["b.json"])
    expect(ledger.db.query("SELECT owner_id FROM claims WHERE name = 'b.json'").get()).toEqual({ owner_id: "other" })
  })
})

describe("the pipeline and the ledger's transactions", () => {
  it("judges and commits a batch with no claim transaction in flight, so a stall cannot hold a claim's locks", async () => {
    const t = tempQueue(Object.fromEntries([1, 2, 3, 4, 5, 6, 7, 8].map((i) => [`m${i}.json`, msg(`id-${i}`, i)])))
    // Each claim answers a few milliseconds late, as a database server's does. A batch judged
    // while one is unanswered would keep that transaction, and its row locks, open through
    // whatever stalls the judging (a synchronous handler, a stopped process).
    let inFlight = 0
    const commitsDuringClaims: number[] = []
    let commits = 0
    const ledger = new Proxy(t.ledger, {
      get(target, key) {
        if (key === "claim")
          return async (...args: Parameters<SqliteLedger["claim"]>) => {
            inFlight++
            try {
              await Bun.sleep(5)
              return target.claim(...args)
            } finally {
              inFlight--
            }
          }
        if (key === "commit")
          return (...args: Parameters<SqliteLedger["commit"]>) => {
            commits++
            if (inFlight > 0) commitsDuringClaims.push(commits)
            return target.commit(...args)
          }
        const value = Reflect.get(target, key)
        return typeof value === "function" ? value.bind(target) : value
      },
    })
    const summary = await consume({ queue: t.q, ledger, batchSize: 2, pipeline: true })
    expect(commits).toBe(4)
    expect(commitsDuringClaims).toEqual([])
    expect(summary.processed).toBe(8)
    expect(ls(t.q.processing)).toEqual([])
    expect(rows(t.ledger, "SELECT * FROM claims")).toEqual([])
  })
})
