import {
  type CommandSpec,
  ExitCode,
  emptyStats,
  type LedgerPort,
  type LedgerStats,
  openExistingLedger,
  openQueue,
  parseDuration,
  redact,
  resolveLedgerUrl,
  resolveRoot,
  runCommand,
  SpoolError,
  type StatsPeriod,
} from "@spool/core/engine"

const spec = {
  name: "stats",
  usage: "bun run stats [--root DIR] [--json] [--window DURATION]",
  summary:
    "Reads ROOT/ledger.db and prints what the consumer has done, over all time and over a recent window:\n" +
    "messages processed, duplicates and the duplicate rate (duplicates / (processed + duplicates)),\n" +
    "conflicts (duplicates whose content differs), failures by reason, poison messages and replays.\n" +
    "Read-only: safe to run while consumers are working. A queue with no ledger yet shows zeros.",
  options: {
    root: { type: "string" },
    ledger: { type: "string" },
    json: { type: "boolean" },
    window: { type: "string" },
  },
  help: [
    "--root DIR            queue root (default: $SPOOL_ROOT, else ./spool)",
    "--ledger URL          a postgres:// ledger (default: $SPOOL_LEDGER_URL, else SQLite in ROOT/ledger.db)",
    "--window DURATION     the recent window, e.g. 15m, 24h, 7d (default 24h)",
    "--json                one JSON object on stdout instead of the table",
  ],
} satisfies CommandSpec<Record<string, { type: "string" | "boolean" }>>

/** `bun run stats`: ledger statistics as a table or JSON. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values: v }) => {
    const windowText = v.window ?? "24h"
    const windowMs = parseDuration(windowText, "--window")
    if (windowMs <= 0)
      throw new SpoolError("usage", `--window must be longer than 0, not ${JSON.stringify(windowText)}`)
    const queue = openQueue(resolveRoot(v.root))
    const since = new Date(Date.now() - windowMs)
    const url = resolveLedgerUrl(v.ledger)
    const stats = await statsOf(await openExistingLedger(queue, { url, readonly: true }), since)
    if (v.json) {
      const out = { root: queue.root, window: { text: windowText, ms: windowMs }, ...stats }
      process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
    } else {
      process.stdout.write(formatStats(stats, url === undefined ? queue.ledger : redact(url), windowText))
    }
    return ExitCode.ok
  })
}

/** The ledger's statistics, closing it; zeros where there is no ledger yet. */
async function statsOf(ledger: LedgerPort | undefined, since: Date): Promise<LedgerStats> {
  if (ledger === undefined) return emptyStats(since)
  try {
    return await ledger.stats(since)
  } finally {
    await ledger.close()
  }
}

/** The human table of `bun run stats`. */
export function formatStats(stats: LedgerStats, ledgerPath: string, windowText: string): string {
  const a = stats.allTime
  const r = stats.recent
  const rows: [string, string, string][] = [
    ["", "all time", `last ${windowText}`],
    ["processed", count(a.processed), count(r.processed)],
    ["duplicates", count(a.duplicates), count(r.duplicates)],
    ["duplicate rate", rate(a), rate(r)],
    ["conflicts", count(a.conflicts), count(r.conflicts)],
    ["failures", count(a.failures), count(r.failures)],
    ...Object.keys(a.failuresByReason).map((reason): [string, string, string] => [
      `  ${reason}`,
      count(a.failuresByReason[reason] ?? 0),
      count(r.failuresByReason[reason] ?? 0),
    ]),
    ["poison", count(a.poison), count(r.poison)],
    ["replays", count(a.replays), count(r.replays)],
  ]
  const w0 = Math.max(...rows.map((x) => x[0].length))
  const w1 = Math.max(...rows.map((x) => x[1].length))
  const w2 = Math.max(...rows.map((x) => x[2].length))
  const table = rows.map(([l, x, y]) => `${l.padEnd(w0)}  ${x.padStart(w1)}  ${y.padStart(w2)}`.trimEnd())
  const open = Object.entries(stats.openFailures)
    .map(([reason, n]) => `${reason} ${n}`)
    .join(", ")
  return [
    `spool stats for ${ledgerPath}`,
    "",
    ...table,
    "",
    `distinct duplicate msg_ids: ${stats.duplicateIds}`,
    `failures not replayed: ${open || "none"}`,
    `last processed: ${stats.lastProcessedAt ?? "never"}`,
    "",
  ].join("\n")
}

function count(n: number): string {
  return String(n)
}

function rate(p: StatsPeriod): string {
  return p.duplicateRate === null ? "-" : `${(p.duplicateRate * 100).toFixed(1)}%`
}
