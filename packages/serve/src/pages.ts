// The console's pages, rendered on the server. Every value goes through hono's `html` template,
// which escapes it: a file name, a reason or a detail is text on the page, never markup.
import type { ListEntry } from "@spool/consumer/list"
import type { ShowReport } from "@spool/consumer/show"
import { quoteName, type StatsPeriod } from "@spool/core/engine"
import { histogramEdgesMinutes } from "@spool/ops/lag"
import { html } from "hono/html"
import type { FailureFilter, FailureGroup, Overview } from "./read.ts"

/** A rendered page or fragment. */
export type Html = ReturnType<typeof html>

const style = `
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222}
header{background:#234;color:#fff;padding:.5em 1em;display:flex;gap:1.5em;align-items:center}
header a{color:#fff}main{padding:1em}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}.ok{color:#070}.bad{color:#b00;font-weight:bold}
pre{white-space:pre-wrap;margin:0}
.uplot table,.uplot td,.uplot th{border:0;margin:0}`

/** The frame of every page: the root, the links between pages and the message search. */
export function layout(title: string, root: string, body: Html, hasChart = false): Html {
  const chart = hasChart
    ? html`<link rel="stylesheet" href="/assets/uplot.css"><script src="/assets/uplot.js" defer></script><script src="/assets/console.js" defer></script>`
    : ""
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title} · spool</title>
<meta name="viewport" content="width=device-width,initial-scale=1"><style>${style}</style>${chart}</head>
<body><header><strong>spool</strong><span>${root}</span>
<a href="/">Overview</a><a href="/failures">Failures</a><a href="/deferred">Deferred</a>
<form action="/message" method="get"><input name="q" placeholder="file name or msg_id" aria-label="file name or msg_id"> <button>Show</button></form>
</header><main><h1>${title}</h1>${body}</main></body></html>`
}

const dirs = ["inbox", "processing", "deferred", "error", "done"] as const

/** The overview: lag's counts and histogram, stats' figures, and the consumers holding claims. */
export function overviewPage(o: Overview): Html {
  const r = o.lag
  const s = o.stats
  const heads = [...histogramEdgesMinutes.map((m) => `<${m}m`), `${histogramEdgesMinutes.at(-1)}m+`]
  const state =
    o.verdict.length === 0
      ? html`<p class="ok" data-metric="state">OK</p>`
      : html`<p class="bad" data-metric="state">${o.verdict.join("; ")}</p>`
  return layout(
    "Overview",
    o.root,
    html`${state}
<p>Read at <span data-metric="read_at">${o.readAt}</span>.</p>
<h2>Files</h2>
<table><tr><th>directory</th><th>files</th></tr>
${dirs.map((d) => html`<tr><td>${d}/</td><td class="n" data-metric="${d}">${r[d]}</td></tr>`)}
<tr><td>ignored in inbox/</td><td class="n" data-metric="ignored">${r.ignored}</td></tr></table>
<p>Oldest in inbox/: <span data-metric="oldest_inbox">${Math.floor(r.oldestInboxAgeSeconds)}</span>s ·
oldest in processing/: <span data-metric="oldest_processing">${Math.floor(r.oldestProcessingAgeSeconds)}</span>s ·
idle: <span data-metric="idle">${Math.floor(r.idleSeconds)}</span>s</p>
<h2>Age histogram (minutes)</h2>
<table><tr><th></th><th>total</th>${heads.map((h) => html`<th>${h}</th>`)}</tr>
${Object.entries(r.histogram ?? {}).map(
  ([dir, counts]: [string, readonly number[]]) =>
    html`<tr><td>${dir}/</td><td class="n">${counts.reduce((a, b) => a + b, 0)}</td>${counts.map((n) => html`<td class="n">${n}</td>`)}</tr>`,
)}</table>
<h2>Ledger</h2>
<table><tr><th></th><th>all time</th><th>recent window</th></tr>
${statRow("processed", s.allTime, s.recent, (p) => p.processed)}
${statRow("duplicates", s.allTime, s.recent, (p) => p.duplicates)}
${statRow("duplicate rate", s.allTime, s.recent, (p) => (p.duplicateRate === null ? "-" : `${(p.duplicateRate * 100).toFixed(1)}%`))}
${statRow("conflicts", s.allTime, s.recent, (p) => p.conflicts)}
${statRow("failures", s.allTime, s.recent, (p) => p.failures)}
${statRow("poison", s.allTime, s.recent, (p) => p.poison)}
${statRow("replays", s.allTime, s.recent, (p) => p.replays)}</table>
<p>Format errors: <span data-metric="format">${s.failuresByClass.format}</span> ·
business errors: <span data-metric="business">${s.failuresByClass.business}</span> ·
deferred now: <span data-metric="deferred_now">${s.deferrals.deferred}</span> (<span data-metric="deferred_due">${s.deferrals.due}</span> due) ·
last processed: ${s.lastProcessedAt ?? "never"}</p>
<h2>History</h2>
<div id="history-chart" data-history="/api/history">The ledger's history over the window: processed, duplicates and failures per bucket (/api/history).</div>
${o.sources.length === 0 ? "" : sourcesTable(o)}
<h2>Consumers holding claims</h2>
${
  o.holders.length === 0
    ? html`<p>None.</p>`
    : html`<table><tr><th>consumer</th><th>claims</th><th>last heartbeat</th><th>age</th></tr>
${o.holders.map((h) => html`<tr><td>${h.owner}</td><td class="n">${h.claims}</td><td>${h.heartbeatAt}</td><td class="n">${h.heartbeatAgeSeconds}s</td></tr>`)}</table>`
}`,
    true,
  )
}

/** Each broker source's backlog as its broker tells it, or why it cannot be told. */
function sourcesTable(o: Overview): Html {
  return html`<h2>Broker sources</h2>
<table><tr><th>source</th><th>waiting</th><th>unacked</th><th>what the broker says</th></tr>
${o.sources.map(({ source, backlog: b }) =>
  b.state === "read"
    ? html`<tr class="source"><td>${source}</td><td class="n" data-source-waiting>${b.waiting}</td><td class="n" data-source-unacked>${b.unacked ?? "-"}</td><td>${b.what}${b.note === undefined ? "" : html`<br><small>${b.note}</small>`}</td></tr>`
    : html`<tr class="source"><td>${source}</td><td colspan="2" class="bad" data-source-state>${b.state === "unreachable" ? "unreachable" : "not available"}</td><td>${b.state === "unreachable" ? "unreachable: " : ""}${b.reason}</td></tr>`,
)}</table>`
}

function statRow(label: string, a: StatsPeriod, w: StatsPeriod, f: (p: StatsPeriod) => number | string): Html {
  const key = label.replace(/ /g, "_")
  return html`<tr><td>${label}</td><td class="n" data-metric="${key}">${f(a)}</td><td class="n" data-metric="${key}_recent">${f(w)}</td></tr>`
}

/** What the failures page offers: nothing, a link to log in, or the replay and delete forms. */
export type FailureForms = "read-only" | "log-in" | { readonly csrf: string }

/** The error/ files grouped by class and reason, each attempt's detail the latest first. */
export function failuresPage(
  root: string,
  groups: readonly FailureGroup[],
  more: number,
  forms: FailureForms = "read-only",
  filter: FailureFilter = {},
): Html {
  const pick = (name: string) =>
    typeof forms === "object" ? html`<input type="checkbox" name="file" value="${name}" aria-label="select">` : ""
  const body =
    groups.length === 0
      ? html`<p>No files in error/.</p>`
      : groups.map(
          (g) =>
            html`<section class="group"><h2><a href="/failures?reason=${encodeURIComponent(g.reason)}">${g.class}: ${g.reason}</a> (${g.files.length})</h2>
<table><tr><th></th><th>file</th><th>attempts</th><th>replays</th><th>detail, the latest first</th></tr>
${g.files.map(
  (
    f,
  ) => html`<tr class="failed-file"><td>${pick(f.entry.name)}</td><td><a href="/message?q=${encodeURIComponent(f.entry.name)}">${quoteName(f.entry.name)}</a></td>
<td class="n">${f.attempts.length}</td><td class="n">${f.replays}</td>
<td>${f.attempts.map((a) => html`<pre>${a.failedAt} ${a.reason}: ${a.detail}</pre>`)}</td></tr>`,
)}</table></section>`,
        )
  const by = filter.reason !== undefined ? "reason" : filter.class !== undefined ? "class" : undefined
  const value = by === undefined ? undefined : (filter[by] ?? "")
  const shown =
    by === undefined ? "" : html`<p id="filter">Only ${by} ${value}. <a href="/failures">Show every failure</a></p>`
  if (typeof forms !== "object")
    return layout(
      "Failures",
      root,
      html`${shown}${forms === "log-in" ? html`<p><a href="/login">Log in</a> to replay or delete.</p>` : ""}${body}${moreLine(more)}`,
    )
  // Filtered, "all" means all of that reason or class: the same selection as replay --reason or --class.
  // Files with no failure recorded (reason and class unknown) are no selection's: each is replayed by its name.
  const all =
    by === undefined
      ? html`<button name="scope" value="all">Replay all</button>`
      : value === "unknown"
        ? ""
        : html`<input type="hidden" name="value" value="${value}"><button name="scope" value="${by}">Replay all of ${by} ${value}</button>`
  return layout(
    "Failures",
    root,
    html`${shown}<form method="post" action="/replay" id="operate"><input type="hidden" name="csrf" value="${forms.csrf}">
<p><label><input type="checkbox" name="dry" value="1" checked> dry run: show what would move or be skipped, change nothing</label></p>
<p><button name="scope" value="selected">Replay selected</button> ${all}
<button name="scope" value="selected" formaction="/delete">Delete selected</button></p>
${body}</form>${moreLine(more)}`,
  )
}

/** The deferred/ files with their attempts so far and next attempt. */
export function deferredPage(root: string, entries: readonly ListEntry[], more: number): Html {
  const body =
    entries.length === 0
      ? html`<p>No files in deferred/.</p>`
      : html`<table><tr><th>file</th><th>msg_id</th><th>attempts</th><th>next attempt</th><th>last error</th></tr>
${entries.map(
  (
    e,
  ) => html`<tr class="deferred-file"><td><a href="/message?q=${encodeURIComponent(e.name)}">${quoteName(e.name)}</a></td>
<td>${e.deferral?.msgId ?? "-"}</td><td class="n">${e.deferral?.attempts ?? "-"}</td>
<td>${e.deferral?.nextAttemptAt ?? "not in the ledger"}</td><td><pre>${e.deferral?.lastError ?? ""}</pre></td></tr>`,
)}</table>`
  return layout("Deferred", root, html`${body}${moreLine(more)}`)
}

/** One file's or msg_id's history, as `spool show` gives it, oldest event first. */
export function messagePage(root: string, query: string, report: ShowReport | undefined): Html {
  if (report === undefined)
    return layout(
      "Message",
      root,
      html`<p class="bad">No file or msg_id ${quoteName(query)}: no entry of that name in the queue's directories and no ledger row with that file name or msg_id.</p>`,
    )
  return layout(
    "Message",
    root,
    html`<p>${report.kind === "file" ? "File" : "msg_id"} <strong>${quoteName(query)}</strong>${
      report.locations === undefined || report.locations.length === 0
        ? ""
        : html`, now in ${report.locations.map((d) => `${d}/`).join(", ")}`
    }${report.msgIds.length === 0 ? "" : html`; msg_id ${report.msgIds.join(", ")}`}</p>
<table><tr><th>time</th><th>event</th><th>file</th><th>what</th></tr>
${report.timeline.map(
  (e) => html`<tr class="event"><td>${e.at}</td><td>${e.event}</td><td>${quoteName(e.file)}</td>
<td><pre>${[e.reason, e.class && `(${e.class})`, e.detail, e.owner && `by ${e.owner}`, e.attempts !== undefined && `attempts ${e.attempts}`].filter(Boolean).join(" ")}</pre></td></tr>`,
)}</table>`,
  )
}

function moreLine(more: number): Html | string {
  return more === 0 ? "" : html`<p>${more} more not shown.</p>`
}
