// The console's state-changing routes: /login, and replay and delete as POSTs that pass the
// guard (token, CSRF token, same origin). Each attempt, refused or run, is logged on stderr with
// its time and the client's address.
import { SpoolError } from "@spool/core/engine"
import type { Context, Hono } from "hono"
import { getConnInfo } from "hono/bun"
import { setCookie } from "hono/cookie"
import { csrfField, isSameSecret, originRefusal, readOnly, refusalOf, sessionOf, tokenCookieOf } from "./guard.ts"
import { operate, operationOf } from "./operate.ts"
import { loginPage, operatedPage, refusedPage } from "./pages-operate.ts"
import type { Source } from "./read.ts"

/**
 * Adds /login, /replay and /delete to `app`; without a token they refuse with 403. `changed` is
 * called once a command has run, so that the pages after it read the queue anew.
 */
export function addOperatorRoutes(app: Hono, source: Source, token: string | undefined, changed: () => void): void {
  app.get("/login", (c) => c.html(loginPage(source.root, token !== undefined)))
  app.post("/login", async (c) => {
    // Refused before the body is read: a read-only console, or another origin, reads nothing.
    const before = token === undefined ? readOnly : originRefusal(c)
    const form = before === undefined ? await c.req.parseBody() : {}
    const given = typeof form.token === "string" ? form.token : undefined
    const why =
      before ?? (token !== undefined && isSameSecret(given, token) ? undefined : "that is not the console's token")
    log(c, "login", why === undefined ? "accepted" : `refused: ${why}`)
    if (why !== undefined || given === undefined) return c.html(refusedPage(source.root, why ?? ""), 403)
    const isHttps = new URL(c.req.url).protocol === "https:" || c.req.header("X-Forwarded-Proto") === "https"
    setCookie(c, tokenCookieOf(c), sessionOf(given), { httpOnly: true, sameSite: "Strict", path: "/", secure: isHttps })
    return c.redirect("/failures", 303)
  })
  for (const command of ["replay", "delete"] as const)
    app.post(`/${command}`, async (c) => {
      // Whoever is refused without the form (no token, another origin) has the body left unread.
      const before = refusalOf(c, token, undefined, { isCsrfLater: true })
      const form = before === undefined ? await c.req.parseBody({ all: true }) : {}
      const csrf = typeof form[csrfField] === "string" ? form[csrfField] : undefined
      const why = before ?? refusalOf(c, token, csrf)
      const wantsJson = (c.req.header("Accept") ?? "").includes("application/json")
      if (why !== undefined) {
        log(c, command, `refused: ${why}`)
        return wantsJson ? c.json({ error: why }, 403) : c.html(refusedPage(source.root, why), 403)
      }
      let op: ReturnType<typeof operationOf>
      try {
        op = operationOf(command, form)
      } catch (error) {
        if (!(error instanceof SpoolError)) throw error
        log(c, command, `refused: ${error.message}`)
        return wantsJson ? c.json({ error: error.message }, 400) : c.html(refusedPage(source.root, error.message), 400)
      }
      const done = await operate(source, op)
      changed()
      log(c, done.line, `exit ${done.exitCode}`)
      return wantsJson ? c.json(done) : c.html(operatedPage(source.root, done))
    })
}

function log(c: Context, what: string, outcome: string): void {
  let address = "unknown"
  try {
    address = getConnInfo(c).remote.address ?? address
  } catch {
    // A request handed to the app directly (app.request) has no connection.
  }
  process.stderr.write(`serve: ${new Date().toISOString()} ${address} ${what}: ${outcome}\n`)
}
