// The console's machine endpoints and pages on a real queue, on both ledgers: processed,
// duplicate, failed and deferred messages made by the real consume and a library application.
// The numbers it shows must be the ones lag and stats print; no markup from a name reaches a page.
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import type { ListEntry } from "@spool/consumer/list"
import type { ShowReport } from "@spool/consumer/show"
import { createApp, type FailureGroup, type History, noReuse, type Overview } from "@spool/serve"
import { type BackendQueue, ledgerBackends, requireTool, run, tempQueue } from "@spool/test-support"
import { hostileNames, populate, spoolBin, startServe } from "./serve-queue.ts"

const itWithPromtool = requireTool("promtool", "apt-get install prometheus")

/** A console on `q` with lag's stalled-after of 10 minutes and stats' window of a day. */
function consoleOf(q: BackendQueue) {
  return createApp({
    root: q.root,
    url: q.url,
    windowMs: 86_400_000,
    windowText: "24h",
    stalledAfterSeconds: 600,
  })
}

const backends = await ledgerBackends()
/** broken.json and every hostile name: the error/ files of the shared queue. */
const failed = 1 + hostileNames.length

for (const backend of backends) {
  describe.skipIf(backend.skip !== undefined)(`spool serve on the ${backend.name} ledger`, () => {
    let q: BackendQueue
    let app: ReturnType<typeof consoleOf>
    beforeAll(async () => {
      q = await backend.queue()
      await populate(q)
      app = consoleOf(q)
    })
    const api = async <T>(path: string): Promise<T> => (await app.request(path)).json() as Promise<T>
    afterAll(async () => {
      await q?.[Symbol.asyncDispose]()
    })

    it("shows in /api/overview the counts lag prints and the figures stats prints", async () => {
      const lag = JSON.parse((await run(["bun", spoolBin, "lag", "--json", "--root", q.root, "1000"])).stdout)
      const stats = JSON.parse((await q.command("stats", ["--json"])).stdout)
      const o = await api<Overview>("/api/overview")
      for (const d of ["inbox", "processing", "error", "done", "deferred", "ignored"] as const)
        expect(o.lag[d]).toBe(lag[d])
      expect([o.lag.error, o.lag.done, o.lag.deferred]).toEqual([failed, 3, 1])
      expect(o.stats.allTime).toEqual(stats.allTime)
      expect(o.stats.deferrals).toEqual(stats.deferrals)
      expect(o.stats.failuresByClass).toEqual(stats.failuresByClass.allTime)
      expect(o.stats.allTime.duplicates).toBe(1)
      expect(o.verdict).toEqual([])
    })

    it("puts the same numbers on the overview page", async () => {
      const page = await (await app.request("/")).text()
      const metric = (name: string) => new RegExp(`data-metric="${name}">([^<]*)<`).exec(page)?.[1]
      expect([metric("error"), metric("done"), metric("deferred"), metric("inbox")]).toEqual([
        String(failed),
        "3",
        "1",
        "0",
      ])
      expect([metric("processed"), metric("duplicates"), metric("failures")]).toEqual(["2", "1", String(failed)])
      expect(metric("state")).toBe("OK")
    })

    it("charts the window's history in buckets that add up to stats' recent figures", async () => {
      const stats = JSON.parse((await q.command("stats", ["--json"])).stdout)
      const h = await api<History>("/api/history")
      const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0)
      expect(h.at.length).toBe(24)
      expect([sum(h.processed), sum(h.duplicates), sum(h.failures)]).toEqual([
        stats.recent.processed,
        stats.recent.duplicates,
        stats.recent.failures,
      ])
      expect(sum(h.processed)).toBe(2)
      const script = await app.request("/assets/uplot.js")
      expect([script.status, script.headers.get("content-type")]).toEqual([200, "text/javascript"])
      expect((await script.text()).length).toBeGreaterThan(10_000)
    })

    it("answers /healthz with 200 while the root and ledger can be read", async () => {
      const res = await app.request("/healthz")
      expect([res.status, await res.text()]).toEqual([200, "ok\n"])
    })

    itWithPromtool("serves /metrics that promtool accepts, with lag's and stats' series", async () => {
      const res = await app.request("/metrics")
      const text = await res.text()
      expect(res.headers.get("content-type")).toStartWith("text/plain; version=0.0.4")
      expect(text).toContain(`spool_messages{root="${q.root}",dir="error"} ${failed}`)
      expect(text).toContain(`spool_processed_total{root="${q.root}"} 2`)
      expect(text).toContain(`spool_ledger_up{root="${q.root}"} 1`)
      // When its figures were read: a scrape is answered from the latest reading.
      const readAt = Number(/spool_console_read_timestamp_seconds\{root="[^"]*"\} ([\d.]+)/.exec(text)?.[1])
      expect(Math.abs(readAt - Date.now() / 1000)).toBeLessThan(600)
      const check = Bun.spawn(["promtool", "check", "metrics"], { stdin: Buffer.from(text), stderr: "pipe" })
      expect([await new Response(check.stderr).text(), await check.exited]).toEqual(["", 0])
    })

    it("lists every error/ file by class and reason, with its attempt's detail", async () => {
      const { groups } = await api<{ groups: FailureGroup[] }>("/api/failures")
      const names = groups.flatMap((g) => g.files.map((f) => f.entry.name))
      expect(names.sort()).toEqual(fs.readdirSync(join(q.root, "error")).sort())
      const parse = groups.find((g) => g.reason === "parse")
      expect(parse?.class).toBe("format")
      expect(parse?.files[0]?.attempts.length).toBe(1)
      const page = await (await app.request("/failures")).text()
      expect(page).toContain("broken.json")
      expect(page).toContain(`format: parse</a> (${failed})`)
      const only = async (query: string) =>
        (await api<{ groups: FailureGroup[] }>(`/api/failures?${query}`)).groups.map((g) => g.reason)
      expect([await only("reason=parse"), await only("class=format"), await only("class=business")]).toEqual([
        ["parse"],
        ["parse"],
        [],
      ])
    })

    it("shows the deferred file with its next attempt", async () => {
      const { entries } = await api<{ entries: ListEntry[] }>("/api/deferred")
      expect(entries.map((e) => e.name)).toEqual(["later.json"])
      const next = entries[0]?.deferral?.nextAttemptAt ?? ""
      expect(Date.parse(next)).toBeGreaterThan(Date.now())
      expect(await (await app.request("/deferred")).text()).toContain(next)
    })

    it("shows a message's history by msg_id, as spool show does", async () => {
      const show = JSON.parse((await q.command("show", ["--json", "m-1"])).stdout)
      expect(await api<ShowReport>("/api/message?q=m-1")).toEqual(show)
      const page = await (await app.request("/message?q=m-1")).text()
      expect(page).toContain("processed")
      expect(page).toContain("duplicate")
      expect(page).toContain("again.json")
      const missing = await app.request("/message?q=nothing-of-that-name")
      expect(missing.status).toBe(404)
    })

    it("renders hostile file names as text on every page", async () => {
      const pages = await Promise.all(
        ["/failures", "/", ...hostileNames.map((n) => `/message?q=${encodeURIComponent(n)}`)].map(async (p) =>
          (await app.request(p)).text(),
        ),
      )
      for (const page of pages) {
        expect(page).not.toMatch(/<script>alert|<img |<b>bold|<i>not json/)
        expect(page).not.toContain(`'onmouseover='`)
      }
      const failures = pages[0] ?? ""
      expect(failures).toContain("&lt;script&gt;alert(1).json")
      expect(failures).toContain("&amp;lt;b&amp;gt;entity.json")
    })
  })
}

describe("/metrics while the ledger cannot be read", () => {
  it("still gives the files' series, with spool_ledger_up 0, so that backlog alerts keep working", async () => {
    await using q = await tempQueue({ seed: { "a.json": { msg_id: "m-1", order_no: "O", seq: 1, amount: 1 } } })
    const app = createApp({
      root: q.root,
      url: "postgres://postgres@127.0.0.1:1/down",
      windowMs: 86_400_000,
      windowText: "24h",
      stalledAfterSeconds: 600,
    })
    const res = await app.request("/metrics")
    const text = await res.text()
    expect(res.status).toBe(200)
    expect(text).toContain(`spool_messages{root="${q.root}",dir="inbox"} 1`)
    expect(text).toContain(`spool_ledger_up{root="${q.root}"} 0`)
    expect(text).not.toContain("spool_processed_total")
    expect((await app.request("/healthz")).status).toBe(503)
  })

  it("answers without the ledger when its server accepts and never answers, before Prometheus's 10 s timeout", async () => {
    await using q = await tempQueue()
    // A server that takes the connection and says nothing, as a stopped (SIGSTOP) PostgreSQL.
    using silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
    const app = createApp({
      root: q.root,
      url: `postgres://postgres@127.0.0.1:${silent.port}/hung`,
      windowMs: 86_400_000,
      windowText: "24h",
      stalledAfterSeconds: 600,
    })
    const started = Date.now()
    const text = await (await app.request("/metrics")).text()
    expect(text).toContain(`spool_ledger_up{root="${q.root}"} 0`)
    expect(Date.now() - started).toBeLessThan(9_000)
  }, 30_000)
})

describe("spool serve, the process", () => {
  it("answers /healthz with 503 and the reason once the root cannot be read", async () => {
    const q = await backends[0]?.queue()
    if (q === undefined) throw new Error("no SQLite backend")
    await using _q = q
    await using served = await startServe(q.root)
    expect(served.url).toStartWith("http://127.0.0.1:")
    expect((await fetch(new URL("/healthz", served.url))).status).toBe(200)
    fs.rmSync(join(q.root, "error"), { recursive: true })
    const res = await fetch(new URL("/healthz", served.url))
    expect(res.status).toBe(503)
    expect(await res.text()).toContain("error")
  })

  it("warns when it listens beyond the loopback address, and not on it", async () => {
    const q = await backends[0]?.queue()
    if (q === undefined) throw new Error("no SQLite backend")
    await using _q = q
    await using local = await startServe(q.root)
    await using wide = await startServe(q.root, ["--host", "0.0.0.0"])
    expect(local.stderr()).not.toContain("warning")
    expect(wide.stderr()).toContain("serve: warning: listening on 0.0.0.0 in plain HTTP")
  })

  it("says the port is in use, exit 3, when something else listens on it", async () => {
    const q = await backends[0]?.queue()
    if (q === undefined) throw new Error("no SQLite backend")
    await using _q = q
    using taken = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") })
    const r = await run(["bun", spoolBin, "serve", "--root", q.root, "--port", String(taken.port)])
    expect(r.stderr).toBe(
      `serve: cannot listen on 127.0.0.1:${taken.port}; the port is in use: stop what holds it, or choose another --port\n`,
    )
    expect(r.exitCode).toBe(3)
  })

  it("refuses an empty --host, which would listen on every address, and a port past 65535, with exit 2", async () => {
    await using q = await tempQueue()
    const empty = await run(["bun", spoolBin, "serve", "--root", q.root, "--host", "", "--port", "0"])
    expect(empty.stderr).toBe("serve: --host is empty, which would listen on every address; give one, e.g. 127.0.0.1\n")
    expect(empty.exitCode).toBe(2)
    const far = await run(["bun", spoolBin, "serve", "--root", q.root, "--port", "70000"])
    expect(far.stderr).toBe("serve: --port takes 0 to 65535, not 70000\n")
    expect(far.exitCode).toBe(2)
  })

  it("answers on a loopback address only for its own names and --allow-host's: a rebound name is refused", async () => {
    await using q = await tempQueue()
    await using served = await startServe(q.root, ["--allow-host", "console.example.org"])
    const port = new URL(served.url).port
    const as = (host: string) => fetch(new URL("/api/overview", served.url), { headers: { Host: host } })
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, "LOCALHOST", "console.example.org"])
      expect((await as(host)).status, host).toBe(200)
    const rebound = await as(`attacker.example:${port}`)
    expect(rebound.status).toBe(421)
    expect(await rebound.text()).toContain("--allow-host NAME")
    // Beyond the loopback address the names it is reached by are not known: any is answered.
    await using wide = await startServe(q.root, ["--host", "0.0.0.0"])
    const res = await fetch(new URL("/api/overview", wide.url), { headers: { Host: "anything.example" } })
    expect(res.status).toBe(200)
  })

  it("refuses a request body over 1 MiB unread, and a read-only console's POST before its body", async () => {
    await using q = await tempQueue()
    await using served = await startServe(q.root)
    const big = await fetch(new URL("/replay", served.url), { method: "POST", body: "x".repeat(2 * 1024 * 1024) })
    expect(big.status).toBe(413)
    const small = await fetch(new URL("/replay", served.url), {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
      body: "file=a.json",
    })
    expect(small.status).toBe(403)
    expect(await small.json()).toEqual({
      error: "this console is read-only: start spool serve with --token-file to allow changes",
    })
  })

  it("refuses a root bound to PostgreSQL when started without its URL, as every command does", async () => {
    const pg = backends.find((b) => b.name === "PostgreSQL")
    if (pg === undefined || pg.skip !== undefined) throw new Error(pg?.skip ?? "no PostgreSQL backend")
    await using q = await pg.queue({ seed: { "a.json": { msg_id: "m-1", order_no: "O", seq: 1, amount: 1 } } })
    expect((await q.command("consume")).exitCode).toBe(0)
    const r = await run(["bun", spoolBin, "serve", "--root", q.root, "--port", "0"], {
      env: { ...process.env, SPOOL_LEDGER_URL: "" },
    })
    expect(r.stderr).toContain(`this root (${q.root}) is bound to the PostgreSQL ledger`)
    expect(r.stderr).toContain("set SPOOL_LEDGER_URL or pass --ledger")
    expect(r.exitCode).toBe(2)
  })

  it("warns when its --token-file may be read by other users, and sends no page to be cached", async () => {
    await using q = await tempQueue()
    const tokenFile = join(q.path, "token")
    fs.writeFileSync(tokenFile, "a-token-of-sixteen-or-more\n", { mode: 0o644 })
    fs.chmodSync(tokenFile, 0o644)
    await using open = await startServe(q.root, ["--token-file", tokenFile])
    expect(open.stderr()).toContain(`serve: warning: --token-file ${tokenFile} may be read by other users (mode 0644)`)
    expect((await fetch(new URL("/failures", open.url))).headers.get("cache-control")).toBe("no-store")
    fs.chmodSync(tokenFile, 0o600)
    await using kept = await startServe(q.root, ["--token-file", tokenFile])
    expect(kept.stderr()).not.toContain("warning")
  })

  it("refuses a --token-file holding a short token with exit 2, saying how to make one", async () => {
    const q = await backends[0]?.queue()
    if (q === undefined) throw new Error("no SQLite backend")
    await using _q = q
    const tokenFile = join(q.root, "..", "token")
    fs.writeFileSync(tokenFile, "short\n")
    const r = await run(["bun", spoolBin, "serve", "--root", q.root, "--port", "0", "--token-file", tokenFile])
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain("holds 5 characters; put a token of 16 or more in it")
    expect(r.exitCode).toBe(2)
  })
})

describe("the overview's verdict", () => {
  it("says stalled in lag's words when files wait and nothing finished for --stalled-after", async () => {
    await using q = await tempQueue({ seed: { "a.json": { msg_id: "a", order_no: "o", seq: 1, amount: 1 } } })
    // Every request reads anew: the test ages the files between two of them.
    const app = createApp(
      { root: q.root, url: undefined, windowMs: 3_600_000, windowText: "1h", stalledAfterSeconds: 600 },
      { freshness: noReuse },
    )
    const fresh = (await (await app.request("/api/overview")).json()) as Overview
    expect([fresh.stalled, fresh.verdict]).toEqual([false, []])
    const hourAgo = new Date(Date.now() - 3_600_000)
    for (const p of ["inbox/a.json", "done", "error"]) fs.utimesSync(join(q.root, p), hourAgo, hourAgo)
    const lag = await run(["bun", spoolBin, "lag", "--root", q.root, "1000", "--stalled-after", "10m"])
    const o = (await (await app.request("/api/overview")).json()) as Overview
    expect(o.stalled).toBe(true)
    expect(lag.stderr).toContain(o.verdict[0] ?? "no verdict")
    const page = await (await app.request("/")).text()
    expect(page).toContain(`data-metric="state">${o.verdict[0]}<`)
  })
})

for (const backend of backends) {
  describe.skipIf(backend.skip !== undefined)(`the consumers holding claims on the ${backend.name} ledger`, () => {
    it("are listed with their claims and last heartbeat, as list shows the claim's owner", async () => {
      await using q = await backend.queue({ seed: { "a.json": { msg_id: "a", order_no: "o", seq: 1, amount: 1 } } })
      expect((await q.command("consume")).exitCode).toBe(0)
      const beat = new Date(Date.now() - 30_000).toISOString()
      const consumer = { host: "worker-7", pid: 4242, boot_id: "b", start_ticks: "1", started_at: beat }
      await q.insert("consumers", { owner_id: "o-1", ...consumer, heartbeat_at: beat })
      for (const name of ["held-1.json", "held-2.json"]) {
        fs.writeFileSync(join(q.root, "processing", name), "{}")
        await q.insert("claims", {
          name,
          claim_id: `c-${name}`,
          owner_id: "o-1",
          attempts: 1,
          state: "claimed",
          claimed_at: beat,
        })
      }
      const listed = JSON.parse((await q.command("list", ["--json", "processing"])).stdout)
      const o = (await (await consoleOf(q).request("/api/overview")).json()) as Overview
      expect(o.holders.map((h) => [h.owner, h.claims, h.heartbeatAt])).toEqual([["worker-7:4242", 2, beat]])
      expect(listed.map((e: { claim: { owner: string } }) => e.claim.owner)).toEqual(["worker-7:4242", "worker-7:4242"])
      expect(o.holders[0]?.heartbeatAgeSeconds).toBeGreaterThanOrEqual(30)
      const page = await (await consoleOf(q).request("/")).text()
      expect(page).toContain("<td>worker-7:4242</td>")
    })
  })
}
