// What a state-changing request must carry: the operator's token (an Authorization: Bearer
// header, or the session cookie /login sets, which holds a hash of it and never the token), a
// CSRF token derived from it, and an Origin that is the console's own. Without a token
// configured, the console is read-only and every POST is 403.
import { timingSafeEqual } from "node:crypto"
import type { Context } from "hono"
import { getCookie } from "hono/cookie"

/**
 * The cookie that carries the operator's session after /login: sessionOf(token), not the token.
 * Named after the port the console is reached on (`spool_token_8787`; `spool_token` on the
 * scheme's own port): browsers keep cookies by host, not port, so consoles of two roots on one
 * host would otherwise log each other out, and each would be sent the other's session.
 */
export function tokenCookieOf(c: Context): string {
  const port = new URL(c.req.url).port
  return port === "" ? "spool_token" : `spool_token_${port}`
}

/** The form field that carries the CSRF token. */
export const csrfField = "csrf"

/** The CSRF token of a console token: an HMAC of it, so no state is kept and it changes with the token. */
export function csrfOf(token: string): string {
  return hmacOf(token, "spool serve csrf")
}

/**
 * The session cookie's value for a console token: an HMAC of it, so the browser never stores the
 * token itself (a cookie read off a disk or a proxy's log does not give the bearer token), no
 * state is kept, and every session ends when the token changes.
 */
export function sessionOf(token: string): string {
  return hmacOf(token, "spool serve session")
}

const hmacOf = (key: string, label: string): string => new Bun.CryptoHasher("sha256", key).update(label).digest("hex")

/** Whether two secrets are equal, in time that does not depend on where they differ. */
export function isSameSecret(given: string | undefined, expected: string): boolean {
  if (given === undefined) return false
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}

/** Whether the request holds the console's token: the session cookie of it, or the token as a bearer header. */
export function isOperator(c: Context, token: string | undefined): boolean {
  if (token === undefined) return false
  const bearer = /^Bearer (.+)$/.exec(c.req.header("Authorization") ?? "")?.[1]
  return isSameSecret(getCookie(c, tokenCookieOf(c)), sessionOf(token)) || isSameSecret(bearer, token)
}

/**
 * Why a state-changing request is refused, undefined when it may go on: it comes from another
 * origin (a browser sends Origin on every POST; a client without one must not be a browser,
 * so Sec-Fetch-Site decides), or lacks the token or the CSRF token. `isCsrfLater`: everything
 * but the CSRF token, which is in the body, checked before the body is read.
 */
export function refusalOf(
  c: Context,
  token: string | undefined,
  csrf: string | undefined,
  options: { readonly isCsrfLater?: boolean } = {},
): string | undefined {
  if (token === undefined) return readOnly
  const foreign = originRefusal(c)
  if (foreign !== undefined) return foreign
  if (!isOperator(c, token)) return "this needs the console's token: log in at /login"
  if (options.isCsrfLater !== true && !isSameSecret(csrf, csrfOf(token)))
    return "the form's CSRF token is missing or stale: reload the page and try again"
  return undefined
}

/** Why a console without a token refuses every change. */
export const readOnly = "this console is read-only: start spool serve with --token-file to allow changes"

/** Why a request from another origin is refused; undefined for the console's own pages. */
export function originRefusal(c: Context): string | undefined {
  const origin = c.req.header("Origin")
  const own = new URL(c.req.url).origin
  const forwarded = c.req.header("X-Forwarded-Host")
  const allowed = forwarded === undefined ? [own] : [own, `https://${forwarded}`, `http://${forwarded}`]
  if (
    origin !== undefined
      ? !allowed.includes(origin)
      : (c.req.header("Sec-Fetch-Site") ?? "same-origin") !== "same-origin"
  )
    return `a request from another origin (${origin ?? c.req.header("Sec-Fetch-Site")}) is refused`
  return undefined
}
