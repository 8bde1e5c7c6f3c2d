// The console in a real browser: Debian's chromium, headless, driven by playwright-core, against
// `spool serve` as a real process on a real queue, on both ledgers. The screenshots in
// docs/images/ come from this run (SPOOL_SCREENSHOTS=docs/images writes them there).
import { afterAll, beforeAll, describe, expect } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { type BackendQueue, ledgerBackends, repoRoot, requireTool, run, tempDir } from "@spool/test-support"
import { type BrowserContext, chromium, type Page } from "playwright-core"
import { chromiumFlags, populate, type Served, spoolBin, startServe } from "./serve-queue.ts"

const itWithChromium = requireTool("chromium", "apt-get install chromium")
const token = "a-token-for-the-browser-tests"
const screenshots = process.env.SPOOL_SCREENSHOTS

const errorFiles = (q: BackendQueue) => fs.readdirSync(join(q.root, "error")).sort()

/** The text of the element marked data-metric=NAME on the page. */
const metric = (page: Page, name: string) => page.locator(`[data-metric="${name}"]`).first().textContent()

async function shoot(page: Page, name: string): Promise<void> {
  const shot = await page.screenshot({ fullPage: true })
  expect(shot.length).toBeGreaterThan(1000)
  if (screenshots !== undefined) fs.writeFileSync(join(repoRoot, screenshots, `console-${name}.png`), shot)
}

for (const backend of await ledgerBackends()) {
  describe.skipIf(backend.skip !== undefined)(`the console in chromium on the ${backend.name} ledger`, () => {
    let q: BackendQueue
    let served: Served
    let browser: BrowserContext
    let profile: AsyncDisposable & { path: string }
    let page: Page
    beforeAll(async () => {
      if (Bun.which("chromium") === null) return
      q = await backend.queue()
      await populate(q)
      const tokenFile = join(q.root, "..", "token")
      fs.writeFileSync(tokenFile, `${token}\n`)
      served = await startServe(q.root, ["--token-file", tokenFile], { ...q.env })
      profile = await tempDir("spool-chromium-")
      browser = await chromium.launchPersistentContext(profile.path, {
        executablePath: Bun.which("chromium") ?? "",
        headless: true,
        args: chromiumFlags,
        viewport: { width: 1100, height: 800 },
      })
      page = browser.pages()[0] ?? (await browser.newPage())
    })
    afterAll(async () => {
      await browser?.close()
      await served?.[Symbol.asyncDispose]()
      await profile?.[Symbol.asyncDispose]()
      await q?.[Symbol.asyncDispose]()
    })

    itWithChromium("shows on the overview the numbers lag and stats print", async () => {
      const lag = JSON.parse((await run(["bun", spoolBin, "lag", "--json", "--root", q.root, "1000"])).stdout)
      const stats = JSON.parse((await q.command("stats", ["--json"])).stdout)
      await page.goto(served.url)
      for (const d of ["inbox", "processing", "deferred", "error", "done"])
        expect(await metric(page, d)).toBe(String(lag[d]))
      for (const f of ["processed", "duplicates", "failures", "replays"])
        expect(await metric(page, f)).toBe(String(stats.allTime[f]))
      expect(await metric(page, "deferred_now")).toBe(String(stats.deferrals.deferred))
      expect(await metric(page, "state")).toBe("OK")
      // uPlot, served by the console itself, draws the history chart.
      await page.waitForSelector("#history-chart .uplot canvas")
      await shoot(page, "overview")
    })

    itWithChromium("lists the error/ files on the failures page", async () => {
      await page.goto(new URL("/failures", served.url).href)
      const shown = await page.locator("tr.failed-file td a").allTextContents()
      expect(shown.length).toBe(errorFiles(q).length)
      expect(shown).toContain("broken.json")
      expect(await page.locator("h2").first().textContent()).toContain("format: parse")
    })

    itWithChromium("refuses a replay without the token with 403, moving nothing", async () => {
      const before = errorFiles(q)
      await page.goto(new URL("/failures", served.url).href)
      const status = await page.evaluate(async () => {
        const res = await fetch("/replay", { method: "POST", body: new URLSearchParams({ file: "broken.json" }) })
        return res.status
      })
      expect(status).toBe(403)
      expect(errorFiles(q)).toEqual(before)
      expect(served.stderr()).toMatch(/127\.0\.0\.1 replay: refused: this needs the console's token/)
    })

    itWithChromium("moves nothing on a dry run of replay all", async () => {
      const before = errorFiles(q)
      await page.goto(new URL("/login", served.url).href)
      await page.fill("input[name=token]", token)
      await page.click('button:has-text("Log in")')
      await page.waitForURL(/\/failures$/)
      expect(await page.isChecked("input[name=dry]")).toBe(true)
      await page.click('button:has-text("Replay all")')
      await page.waitForURL(/\/replay$/)
      expect(await page.locator("#command").textContent()).toBe("spool replay --dry-run --all")
      expect(await page.locator("#exit-code").textContent()).toBe("0")
      expect(await page.locator("#stderr").textContent()).toContain("nothing was changed")
      expect(errorFiles(q)).toEqual(before)
    })

    itWithChromium("replays the selected file with the token and shows it gone from the failures", async () => {
      await page.goto(new URL("/failures", served.url).href)
      await page.uncheck("input[name=dry]")
      await page.check('input[name=file][value="broken.json"]')
      await shoot(page, "failures")
      await page.click('button:has-text("Replay selected")')
      await page.waitForURL(/\/replay$/)
      expect(await page.locator("#exit-code").textContent()).toBe("0")
      expect(await page.locator("#stderr").textContent()).toContain("moved error/broken.json back to inbox/broken.json")
      expect(errorFiles(q)).not.toContain("broken.json")
      expect(fs.existsSync(join(q.root, "inbox", "broken.json"))).toBe(true)
      await page.goto(new URL("/failures", served.url).href)
      expect(await page.locator("tr.failed-file td a").allTextContents()).not.toContain("broken.json")
      await page.goto(served.url)
      expect(await metric(page, "replays")).toBe("1")
      expect(await metric(page, "inbox")).toBe("1")
    })

    itWithChromium("shows a message's history from the search box", async () => {
      await page.goto(served.url)
      await page.fill("input[name=q]", "m-1")
      await page.press("input[name=q]", "Enter")
      await page.waitForURL(/\/message\?q=m-1$/)
      const events = await page.locator("tr.event td:nth-child(2)").allTextContents()
      expect(events).toContain("processed")
      expect(events).toContain("duplicate")
      expect(await page.locator("tr.event").allTextContents()).toContainEqual(expect.stringContaining("again.json"))
      await shoot(page, "message")
    })
  })
}
