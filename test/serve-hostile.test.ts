// The hostile-name corpus on every page of the console, in a real browser: files named with
// markup, entities, URLs, paths, line breaks and invisible characters, failed and processed by
// the real consume, and failures and a deferral whose details are markup, recorded by a library
// application; `spool serve` as a real process, Debian's chromium driven by playwright-core. No
// element or attribute from a name or a detail may reach a page, none of their scripts may run,
// and each name must be shown as the text spool prints it. The Content-Security-Policy would stop
// an injected script by itself: the test looks for the injected elements, which it would not stop.
import { afterAll, beforeAll, describe, expect } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { quoteName } from "@spool/core/engine"
import { hostileDetails, hostileNames, requireTool, run, spool, tempDir, tempQueue } from "@spool/test-support"
import { type BrowserContext, chromium, type Page } from "playwright-core"
import { chromiumFlags, type Served, startServe } from "./serve-queue.ts"

const itWithChromium = requireTool("chromium", "apt-get install chromium")
const refusesApp = join(import.meta.dir, "apps", "refuses.ts")

/** Every element the console's own pages are made of; anything else came from a name or a detail. */
const ownElements = new Set(
  "html head meta title style link script body header strong span a form input button main h1 h2 h3 p table tbody tr th td pre div section label small br canvas".split(
    " ",
  ),
)

const message = (i: number, extra: object = {}) =>
  JSON.stringify({ msg_id: `n-${i}`, order_no: "O", seq: i + 1, amount: 1, ...extra })

/** The names that fit with a prefix of a few bytes (the longest does not). */
const short = hostileNames.filter((n) => Buffer.byteLength(n) < 240)

describe("the hostile-name corpus in the console, in chromium", () => {
  let q: Awaited<ReturnType<typeof tempQueue>>
  let served: Served
  let browser: BrowserContext
  let profile: AsyncDisposable & { path: string }
  let page: Page
  /** Where each name ended, and the names whose failure or deferral carries a hostile detail. */
  const failedNames: string[] = []
  const doneNames: string[] = []
  const detailNames = hostileDetails.map((_, j) => `d${j}${short[j % short.length]}`)
  const deferredName = `later${short[1]}`
  beforeAll(async () => {
    if (Bun.which("chromium") === null) return
    q = await tempQueue()
    // Every third name a valid message (done/), the rest unparsable (error/, reason parse).
    hostileNames.forEach((name, i) => {
      const isValid = i % 3 === 0
      q.put(name, isValid ? message(i) : "<i>not json</i>")
      ;(isValid ? doneNames : failedNames).push(name)
    })
    const consumed = await spool("consume", ["--root", q.root, "--quiet"])
    expect([consumed.stderr, consumed.exitCode]).toEqual(["", 0])
    // Then the details: each refused by the handler with one of them, one deferred with markup.
    hostileDetails.forEach((detail, j) => {
      q.put(detailNames[j] as string, message(100 + j, { detail }))
    })
    q.put(deferredName, message(200, { detail: hostileDetails[1], later: true }))
    const refused = await run(["bun", refusesApp, q.root])
    expect(refused.exitCode).toBe(0)
    expect(JSON.parse(refused.stdout)).toMatchObject({ rejected: hostileDetails.length, deferred: 1 })
    served = await startServe(q.root)
    profile = await tempDir("spool-chromium-")
    browser = await chromium.launchPersistentContext(profile.path, {
      executablePath: Bun.which("chromium") ?? "",
      headless: true,
      args: chromiumFlags,
    })
    page = browser.pages()[0] ?? (await browser.newPage())
  })
  afterAll(async () => {
    await browser?.close()
    await served?.[Symbol.asyncDispose]()
    await profile?.[Symbol.asyncDispose]()
    await q?.[Symbol.asyncDispose]()
  })

  /** Loads `path`, and checks the raw HTML and the page the browser made of it. */
  async function loadInert(path: string): Promise<void> {
    const raw = await (await fetch(new URL(path, served.url))).text()
    for (const hostile of [...hostileNames, ...hostileDetails].filter((h) => /[<>"'&]/.test(h)))
      expect(raw.includes(hostile) ? `${path} holds ${JSON.stringify(hostile)} unescaped` : "escaped").toBe("escaped")
    expect(raw).not.toMatch(/<(img|svg|iframe|b|i)[\s>]|<script>/i)
    const res = await page.goto(new URL(path, served.url).href)
    expect(res?.status()).toBe(200)
    // Run in the page, where the DOM is: written as text, since this package's types have no DOM.
    const found = (await page.evaluate(`(() => {
      const elements = [...document.querySelectorAll("*")]
      return {
        pwned: window.__pwned,
        tags: [...new Set(elements.map((e) => e.tagName.toLowerCase()))],
        handlers: elements.flatMap((e) =>
          [...e.attributes].filter((a) => /^on/i.test(a.name) || /^\\s*javascript:/i.test(a.value)).map((a) => a.name),
        ),
        scripts: [...document.scripts].map((s) => s.getAttribute("src")),
      }
    })()`)) as { pwned: unknown; tags: string[]; handlers: string[]; scripts: (string | null)[] }
    expect(found.pwned).toBeUndefined()
    expect(found.tags.filter((t) => !ownElements.has(t))).toEqual([])
    expect(found.handlers).toEqual([])
    for (const src of found.scripts) expect(src ?? "an inline script").toStartWith("/assets/")
  }

  itWithChromium("keeps the overview, the failures and the deferred page free of their markup", async () => {
    for (const path of ["/", "/failures", "/deferred"]) await loadInert(path)
  })

  itWithChromium("shows each failed name on the failures page as text, as spool prints it", async () => {
    await loadInert("/failures")
    const shown = await page.locator("tr.failed-file td:nth-child(2) a").allTextContents()
    expect(shown.sort()).toEqual([...failedNames, ...detailNames].map(quoteName).sort())
    const details = (await page.locator("tr.failed-file pre").allTextContents()).join("\n")
    for (const detail of hostileDetails) expect(details).toContain(`handler: ${detail}`)
    expect(fs.readdirSync(join(q.root, "error")).sort()).toEqual([...failedNames, ...detailNames].sort())
  })

  itWithChromium("shows the deferred name and its markup error as text", async () => {
    await loadInert("/deferred")
    expect(await page.locator("tr.deferred-file td a").allTextContents()).toEqual([quoteName(deferredName)])
    expect(await page.locator("tr.deferred-file pre").allTextContents()).toEqual([hostileDetails[1] as string])
  })

  itWithChromium("shows each name's own message page, its name as text", async () => {
    const everyName = [...hostileNames, ...detailNames, deferredName].map(quoteName)
    for (const name of [...hostileNames, ...detailNames, deferredName]) {
      const path = `/message?q=${encodeURIComponent(name)}`
      await loadInert(path)
      expect(await page.locator("main p strong").first().textContent()).toBe(quoteName(name))
      // A deferral is no event of show's timeline: the deferred file's page has none yet.
      if (name === deferredName) continue
      // The history of a file also lists the deliveries of the same bytes under other names.
      const files = await page.locator("tr.event td:nth-child(3)").allTextContents()
      expect(files).toContain(quoteName(name))
      for (const f of files) expect(everyName).toContain(f)
    }
    expect(doneNames.length).toBeGreaterThan(0)
  })
})
