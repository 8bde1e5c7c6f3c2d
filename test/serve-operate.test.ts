// The console's replay and delete on a real queue, on both ledgers: refused (403, nothing moved)
// without the token, the CSRF token or the console's own origin; with them, the same outcome as
// spool replay and spool delete, and a dry run that moves nothing.
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { createApp } from "@spool/serve"
import { type BackendQueue, ledgerBackends, type QueueTemplate, templateOf } from "@spool/test-support"

const token = "a-token-for-the-console-tests"
const csrf = new Bun.CryptoHasher("sha256", token).update("spool serve csrf").digest("hex")
// What /login's cookie holds: a hash of the token, never the token.
const session = new Bun.CryptoHasher("sha256", token).update("spool serve session").digest("hex")
const operator = { Origin: "http://localhost", Cookie: `spool_token=${session}` }

function consoleOf(q: BackendQueue, withToken = true) {
  const source = { root: q.root, url: q.url, windowMs: 86_400_000, windowText: "24h", stalledAfterSeconds: 600 }
  return createApp(source, withToken ? { token } : {})
}

const errorFiles = (q: BackendQueue) => fs.readdirSync(join(q.root, "error")).sort()
const post = (fields: [string, string][], headers: Record<string, string> = operator) => ({
  method: "POST",
  body: new URLSearchParams(fields),
  headers,
})

for (const backend of await ledgerBackends()) {
  describe.skipIf(backend.skip !== undefined)(`the console's replay and delete on the ${backend.name} ledger`, () => {
    let template: QueueTemplate
    beforeAll(async () => {
      const q = await backend.queue()
      q.put("a.json", { msg_id: "m-1", order_no: "O", seq: 1, amount: 1 })
      q.put("broken-1.json", "not json")
      q.put("broken-2.json", "not json")
      expect((await q.command("consume")).exitCode).toBe(0)
      template = templateOf(q)
    })
    afterAll(async () => {
      await template?.[Symbol.asyncDispose]()
    })

    it("finds a reason behind more than a page of other failures, and offers no selection for files with no failure recorded", async () => {
      await using q = await template.copy()
      // Files someone put into error/ by hand, which the ledger has no failure of, listed first.
      for (let i = 0; i < 600; i++)
        fs.writeFileSync(join(q.root, "error", `a-${String(i).padStart(3, "0")}.json`), "{}")
      const app = consoleOf(q)
      const parse = (await (await app.request("/api/failures?reason=parse")).json()) as {
        groups: { class: string; reason: string; files: unknown[] }[]
        more: number
      }
      expect(parse.groups.map((g) => [g.class, g.reason, g.files.length])).toEqual([["format", "parse", 2]])
      expect(parse.more).toBe(0)
      const unknown = (await (await app.request("/api/failures?class=unknown")).json()) as typeof parse
      expect(unknown.groups.map((g) => [g.class, g.reason, g.files.length])).toEqual([["unknown", "unknown", 500]])
      expect(unknown.more).toBe(100)
      // No business files here: those without a record are not business failures.
      const business = (await (await app.request("/api/failures?class=business")).json()) as typeof parse
      expect(business.groups).toEqual([])
      const page = await (await app.request("/failures?reason=unknown", { headers: operator })).text()
      expect(page).toContain("Replay selected")
      expect(page).not.toContain("Replay all of reason unknown")
      const metrics = await (await app.request("/metrics")).text()
      expect(metrics).toContain('reason="unknown",class="unknown"} 600')
    })

    it("refuses a replay with 403 and moves nothing when started without a token", async () => {
      await using q = await template.copy()
      const res = await consoleOf(q, false).request(
        "/replay",
        post([
          ["file", "broken-1.json"],
          ["csrf", csrf],
        ]),
      )
      expect(res.status).toBe(403)
      expect(await res.text()).toContain("read-only")
      expect(errorFiles(q)).toEqual(["broken-1.json", "broken-2.json"])
    })

    it.each([
      ["without the token", { Origin: "http://localhost" }, csrf],
      ["without the CSRF token", operator, ""],
      ["from another origin", { ...operator, Origin: "https://evil.example" }, csrf],
      ["from a cross-site form without Origin", { Cookie: operator.Cookie, "Sec-Fetch-Site": "cross-site" }, csrf],
    ])("refuses a replay %s with 403, moving nothing", async (_label, headers, csrfValue) => {
      await using q = await template.copy()
      const app = consoleOf(q)
      const res = await app.request(
        "/replay",
        post(
          [
            ["file", "broken-1.json"],
            ["csrf", csrfValue],
          ],
          headers,
        ),
      )
      expect(res.status).toBe(403)
      expect(errorFiles(q)).toEqual(["broken-1.json", "broken-2.json"])
    })

    it("runs a dry run of replay all that moves nothing and says what it would skip", async () => {
      await using q = await template.copy()
      const res = await consoleOf(q).request("/replay", {
        ...post([
          ["scope", "all"],
          ["dry", "1"],
          ["csrf", csrf],
        ]),
        headers: { ...operator, Accept: "application/json" },
      })
      const done = (await res.json()) as { line: string; exitCode: number; stderr: string }
      expect(done.line).toBe("spool replay --dry-run --all")
      expect(done.exitCode).toBe(0)
      expect(done.stderr).toContain("skip")
      expect(done.stderr).toContain("nothing was changed")
      expect(errorFiles(q)).toEqual(["broken-1.json", "broken-2.json"])
    })

    it("replays the selected file back to inbox/, as spool replay does, and the failures page drops it", async () => {
      await using q = await template.copy()
      const app = consoleOf(q)
      const res = await app.request(
        "/replay",
        post([
          ["scope", "selected"],
          ["file", "broken-1.json"],
          ["csrf", csrf],
        ]),
      )
      expect(res.status).toBe(200)
      expect(await res.text()).toContain('exited <strong id="exit-code">0</strong>')
      expect(errorFiles(q)).toEqual(["broken-2.json"])
      expect(fs.existsSync(join(q.root, "inbox", "broken-1.json"))).toBe(true)
      const page = await (await app.request("/failures", { headers: operator })).text()
      expect(page).not.toContain("broken-1.json")
      expect(page).toContain(`name="csrf" value="${csrf}"`)
      const filtered = await (await app.request("/failures?reason=parse", { headers: operator })).text()
      expect(filtered).toContain('<input type="hidden" name="value" value="parse"><button name="scope" value="reason">')
    })

    it("deletes the selected file, recording it as spool delete does", async () => {
      await using q = await template.copy()
      const res = await consoleOf(q).request(
        "/delete",
        post([
          ["scope", "selected"],
          ["file", "broken-2.json"],
          ["csrf", csrf],
        ]),
      )
      expect(res.status).toBe(200)
      expect(errorFiles(q)).toEqual(["broken-1.json"])
      const rows = await q.rows("SELECT file FROM failures WHERE deleted_at IS NOT NULL")
      expect(rows.map((r) => r.file)).toEqual(["broken-2.json"])
    })
  })
}

describe("the console's login", () => {
  it("sets an HttpOnly, SameSite=Strict cookie of a hash of the right token and refuses a wrong one", async () => {
    const [sqlite] = await ledgerBackends()
    if (sqlite === undefined) throw new Error("no SQLite backend")
    await using q = await sqlite.queue()
    const app = consoleOf(q)
    const wrong = await app.request("/login", post([["token", "not-the-token"]], { Origin: "http://localhost" }))
    expect([wrong.status, wrong.headers.get("set-cookie")]).toEqual([403, null])
    const right = await app.request("/login", post([["token", token]], { Origin: "http://localhost" }))
    expect(right.status).toBe(303)
    expect(right.headers.get("set-cookie")).toBe(`spool_token=${session}; Path=/; HttpOnly; SameSite=Strict`)
    expect(right.headers.get("set-cookie")).not.toContain(token)
  })

  it("names its cookie after the console's port, so that consoles of two roots on one host keep their own sessions", async () => {
    const [sqlite] = await ledgerBackends()
    if (sqlite === undefined) throw new Error("no SQLite backend")
    await using q = await sqlite.queue()
    const app = consoleOf(q)
    const login = await app.request(
      "http://127.0.0.1:8787/login",
      post([["token", token]], { Origin: "http://127.0.0.1:8787" }),
    )
    expect(login.headers.get("set-cookie")).toStartWith(`spool_token_8787=${session};`)
    const page = (port: number) =>
      app.request(`http://127.0.0.1:${port}/failures`, { headers: { Cookie: `spool_token_8787=${session}` } })
    expect(await (await page(8787)).text()).toContain("Replay selected")
    expect(await (await page(8788)).text()).not.toContain("Replay selected")
  })
})
