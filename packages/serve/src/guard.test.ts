import { describe, expect, it } from "bun:test"
import { Hono } from "hono"
import { csrfOf, isSameSecret, refusalOf, sessionOf } from "./guard.ts"

const token = "0123456789abcdef-token"

/** The guard's answer for a POST to http://localhost/x with these headers and CSRF field. */
async function refusal(headers: Record<string, string>, csrf: string | undefined, withToken = true) {
  const app = new Hono().post("/x", (c) => c.text(refusalOf(c, withToken ? token : undefined, csrf) ?? "allowed"))
  return (await app.request("/x", { method: "POST", headers })).text()
}

const own = { Origin: "http://localhost", Cookie: `spool_token=${sessionOf(token)}` }

describe("the guard of state-changing requests", () => {
  it("allows the console's own form with the token and its CSRF token", async () => {
    expect(await refusal(own, csrfOf(token))).toBe("allowed")
    expect(await refusal({ Origin: "http://localhost", Authorization: `Bearer ${token}` }, csrfOf(token))).toBe(
      "allowed",
    )
  })

  it.each([
    ["without a token configured", own, "csrf", false, "read-only"],
    ["from another origin", { ...own, Origin: "http://evil.example" }, "csrf", true, "another origin"],
    [
      "cross-site without Origin",
      { Cookie: own.Cookie, "Sec-Fetch-Site": "cross-site" },
      "csrf",
      true,
      "another origin",
    ],
    ["without the token", { Origin: "http://localhost" }, "csrf", true, "needs the console's token"],
    ["with a wrong token", { ...own, Cookie: "spool_token=wrong" }, "csrf", true, "needs the console's token"],
    // The cookie holds a hash of the token, never the token: the token itself there is no session.
    [
      "with the token itself as its cookie",
      { ...own, Cookie: `spool_token=${token}` },
      "csrf",
      true,
      "needs the console's token",
    ],
    [
      "with the session as a bearer header",
      { Origin: "http://localhost", Authorization: `Bearer ${sessionOf(token)}` },
      "csrf",
      true,
      "needs the console's token",
    ],
    ["without the CSRF token", own, undefined, true, "CSRF token"],
    ["with a wrong CSRF token", own, "0".repeat(64), true, "CSRF token"],
  ] as const)("refuses a request %s", async (_label, headers, csrf, withToken, says) => {
    const given = csrf === "csrf" ? csrfOf(token) : csrf
    expect(await refusal(headers, given, withToken)).toContain(says)
  })

  it("tells equal secrets from unequal ones of any length", () => {
    expect([isSameSecret("abc", "abc"), isSameSecret("abd", "abc"), isSameSecret("ab", "abc")]).toEqual([
      true,
      false,
      false,
    ])
    expect(isSameSecret(undefined, "abc")).toBe(false)
  })
})
