// The pages of the console's state-changing side: the login form, a refusal, and what a replay
// or delete did.
import { html } from "hono/html"
import type { Operated } from "./operate.ts"
import { type Html, layout } from "./pages.ts"

/** The form that exchanges the console's token for a cookie. */
export function loginPage(root: string, hasToken: boolean): Html {
  return layout(
    "Log in",
    root,
    hasToken
      ? html`<form method="post" action="/login"><label>Token <input type="password" name="token" autocomplete="current-password"></label> <button>Log in</button></form>`
      : html`<p>This console is read-only: it was started without --token-file.</p>`,
  )
}

/** Why a request was refused; nothing was changed. */
export function refusedPage(root: string, why: string): Html {
  return layout("Refused", root, html`<p class="bad" id="refusal">${why}</p><p>Nothing was changed.</p>`)
}

/** The command that ran, its exit code and what it printed. */
export function operatedPage(root: string, done: Operated): Html {
  return layout(
    done.exitCode === 0 ? "Done" : "Done, with refusals",
    root,
    html`<p><code id="command">${done.line}</code> exited <strong id="exit-code">${done.exitCode}</strong>.</p>
<h2>Files</h2><pre id="stdout">${done.stdout || "(none)"}</pre>
<h2>Messages</h2><pre id="stderr">${done.stderr || "(none)"}</pre>
<p><a href="/failures">Back to the failures</a></p>`,
  )
}
