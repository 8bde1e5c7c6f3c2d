// The console's reading routes (the state-changing ones are in operator-routes.ts). A request
// that fails to read answers 503 with the reason, as /healthz does, rather than a stack.
import { fileURLToPath } from "node:url"
import { SpoolError, withTimeout } from "@spool/core/engine"
import { type Context, Hono } from "hono"
import { html } from "hono/html"
import { csrfOf, isOperator } from "./guard.ts"
import { readHistory } from "./history.ts"
import { addOperatorRoutes } from "./operator-routes.ts"
import { deferredPage, failuresPage, type Html, layout, messagePage, overviewPage } from "./pages.ts"
import {
  type FailureFilter,
  metricsOf,
  metricsWithoutLedger,
  type Overview,
  readDeferred,
  readFailures,
  readHealth,
  readMessage,
  readQueueOverview,
  readSources,
  type Source,
} from "./read.ts"
import { defaultFreshness, type Freshness, Readings } from "./readings.ts"

/** The files the overview's chart needs, served by the console itself: nothing is fetched from elsewhere. */
const assets = [
  ["/assets/uplot.js", Bun.resolveSync("uplot/dist/uPlot.iife.min.js", import.meta.dir), "text/javascript"],
  ["/assets/uplot.css", Bun.resolveSync("uplot/dist/uPlot.min.css", import.meta.dir), "text/css"],
  ["/assets/console.js", fileURLToPath(new URL("../assets/console.js", import.meta.url)), "text/javascript"],
] as const

/** The Prometheus text exposition format's content type. */
const prometheusType = "text/plain; version=0.0.4; charset=utf-8"

/** What the console may change: nothing without a token; with one, replay and delete for who holds it. */
export interface AppOptions {
  readonly token?: string | undefined
  /** How long a reading of the queue answers requests (see readings.ts). */
  readonly freshness?: Freshness
  /**
   * The host names a request's Host may name (any port); undefined: any. A console on a loopback
   * address lists its own, so that a page whose name an attacker pointed at 127.0.0.1 (DNS
   * rebinding) cannot read it from the operator's browser.
   */
  readonly allowedHosts?: readonly string[] | undefined
}

/** The console of one queue root: its pages, the JSON they are made of, /metrics and /healthz. */
export function createApp(source: Source, options: AppOptions = {}): Hono {
  const { token } = options
  const readings = new Readings(options.freshness ?? defaultFreshness)
  // The brokers are read apart: a slow or unreachable one must not keep the queue's figures from being fresh.
  // The overview page, /metrics and /api/overview are asked most (a dashboard, a scrape): each is
  // made once per pair of readings, not once per request.
  const overviewAs = async (variant: string, render: (o: Overview) => Html | string) => {
    const [queue, sources] = await Promise.all([
      readings.read("overview", () => readQueueOverview(source)),
      readings.read("sources", () => readSources(source)),
    ])
    return await renderedOnce(queue, variant, () => render({ ...queue, sources }), sources)
  }
  const failures = (filter: FailureFilter) =>
    readings.read(`failures\0${filter.class ?? ""}\0${filter.reason ?? ""}`, () => readFailures(source, filter))
  const deferred = () => readings.read("deferred", () => readDeferred(source))
  const app = new Hono()
  const allowed =
    options.allowedHosts === undefined ? undefined : new Set(options.allowedHosts.map((h) => h.toLowerCase()))
  app.use(async (c, next) => {
    const host = hostnameOf(c.req.header("Host"))
    if (allowed !== undefined && (host === undefined || !allowed.has(host)))
      return c.text(
        `this console answers to ${[...allowed].join(", ")}, not ${JSON.stringify(c.req.header("Host") ?? "")}: start spool serve with --allow-host NAME for a name a reverse proxy passes on\n`,
        421,
      )
    return next()
  })
  app.use(async (c, next) => {
    await next()
    // Nothing on these pages is fetched from elsewhere, and none of them is to be framed.
    c.header(
      "Content-Security-Policy",
      "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self'; script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'",
    )
    c.header("X-Content-Type-Options", "nosniff")
    // same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` on its own forms.
    c.header("Referrer-Policy", "same-origin")
    // Every page is read anew (and an operator's carries a CSRF token): none is for a cache to keep.
    if (!c.res.headers.has("Cache-Control")) c.header("Cache-Control", "no-store")
  })
  app.get("/healthz", async (c) => {
    const problem = await readHealth(source)
    return problem === undefined ? c.text("ok\n") : c.text(`unhealthy: ${problem}\n`, 503)
  })
  app.get("/metrics", async (c) => {
    let text: string
    try {
      // A ledger that hangs (its server stopped, not gone) must not hold the scrape past
      // Prometheus's own timeout (10 s by default): past 5 s it is answered without it.
      text = await withTimeout(
        overviewAs("metrics", (o) => metricsOf(source, o)),
        metricsWaitMs,
        () => new SpoolError("io", `the ledger did not answer within ${metricsWaitMs / 1000} s`),
      )
    } catch (error) {
      // The ledger cannot be read: the files still can, and the scrape says which is which.
      if (!(error instanceof SpoolError)) throw error
      process.stderr.write(`serve: GET /metrics: the ledger cannot be read, files only: ${error.message}\n`)
      text = metricsWithoutLedger(source)
    }
    return c.body(text, 200, { "Content-Type": prometheusType })
  })
  app.get("/api/history", async (c) => c.json(await readings.read("history", () => readHistory(source))))
  for (const [path, file, type] of assets)
    app.get(
      path,
      () => new Response(Bun.file(file), { headers: { "Content-Type": type, "Cache-Control": "max-age=3600" } }),
    )
  app.get("/api/overview", async (c) =>
    c.body(await overviewAs("json", (o) => JSON.stringify(o)), 200, { "Content-Type": "application/json" }),
  )
  app.get("/api/failures", async (c) => c.json(await failures(filterOf(c))))
  app.get("/api/deferred", async (c) => c.json(await deferred()))
  app.get("/api/message", async (c) => {
    const q = c.req.query("q") ?? ""
    const report = q === "" ? undefined : await readMessage(source, q)
    return report === undefined ? c.json({ error: `no file or msg_id ${JSON.stringify(q)}` }, 404) : c.json(report)
  })
  app.get("/", async (c) => c.html(await overviewAs("page", overviewPage)))
  app.get("/failures", async (c) => {
    const filter = filterOf(c)
    const reading = await failures(filter)
    const forms = token === undefined ? "read-only" : isOperator(c, token) ? { csrf: csrfOf(token) } : "log-in"
    // A page of a thousand failures takes milliseconds to render: once per reading and kind of visitor.
    const page = await renderedOnce(reading, typeof forms === "object" ? "operator" : forms, () =>
      failuresPage(source.root, reading.groups, reading.more, forms, filter),
    )
    return c.html(page)
  })
  app.get("/deferred", async (c) => {
    const { entries, more } = await deferred()
    return c.html(deferredPage(source.root, entries, more))
  })
  app.get("/message", async (c) => {
    const q = c.req.query("q") ?? ""
    const report = q === "" ? undefined : await readMessage(source, q)
    return c.html(messagePage(source.root, q, report), report === undefined ? 404 : 200)
  })
  addOperatorRoutes(app, source, token, () => readings.clear())
  app.notFound((c) => c.text("not found: see / for the pages, /metrics, /healthz, /api/overview\n", 404))
  app.onError((error, c) => unavailable(c, error))
  return app
}

/** How long a scrape waits for the ledger before it is answered with the files alone. */
const metricsWaitMs = 5000

const rendered = new WeakMap<object, Map<string, { readonly with: unknown; readonly page: string }>>()

/**
 * The text `render` makes of `reading` for `variant`, rendered once while the reading answers
 * requests (and, when the text also shows another reading, `also`, while that one does too).
 */
async function renderedOnce(
  reading: object,
  variant: string,
  render: () => Html | string,
  also?: unknown,
): Promise<string> {
  const pages = rendered.get(reading) ?? new Map<string, { readonly with: unknown; readonly page: string }>()
  rendered.set(reading, pages)
  const held = pages.get(variant)
  if (held !== undefined && held.with === also) return held.page
  const page = String(await render())
  pages.set(variant, { with: also, page })
  return page
}

/** The host name of a Host header, lower case, without its port or an IPv6 address's brackets. */
function hostnameOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  const match = /^(?:\[([^\]]*)\]|([^:]*))(?::\d*)?$/.exec(header.trim())
  const name = match?.[1] ?? match?.[2]
  return name === undefined || name === "" ? undefined : name.toLowerCase()
}

/** The failures a request asks for by its `class` and `reason` parameters. */
function filterOf(c: Context): FailureFilter {
  return { class: c.req.query("class") || undefined, reason: c.req.query("reason") || undefined }
}

function unavailable(c: Context, error: Error): Response | Promise<Response> {
  process.stderr.write(`serve: ${c.req.method} ${c.req.path}: ${error.message}\n`)
  const message = error instanceof SpoolError ? error.message : `unexpected failure: ${error.message}`
  if (c.req.path.startsWith("/api/")) return c.json({ error: message }, 503)
  return c.html(layout("Unavailable", "", html`<p class="bad">${message}</p>`), 503)
}
