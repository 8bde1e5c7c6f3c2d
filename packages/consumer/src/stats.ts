import fs from "node:fs"
import { type CommandSpec, duration, json, ledger, root, runCommand } from "@spool/cli"
import {
  checkRootLedger,
  ExitCode,
  emptyStats,
  Ledger,
  type LedgerStats,
  openQueue,
  PostgresLedger,
  type Queue,
  readSharedStats,
  readStats,
  redact,
  resolveLedgerUrl,
  resolveRoot,
  rootId,
  type StatsPeriod,
} from "@spool/core/engine"

/** `bun run stats`'s options and help. */
export const spec = {
  name: "stats",
  usage: "bun run stats [--root DIR] [--ledger URL] [--json] [--window DURATION]",
  summary: "Ledger statistics, over all time and over a recent window.",
  description:
    "Reads the ledger and prints what the consumer has done, over all time and over a recent window:\n" +
    "messages processed, duplicates and the duplicate rate (duplicates / (processed + duplicates)),\n" +
    "conflicts (duplicates whose content differs), failures by reason, poison messages and replays.\n" +
    "Read-only: safe to run while consumers are working. A queue with no ledger yet shows zeros.",
  options: {
    root,
    ledger,
    window: duration("the recent window, e.g. 15m, 24h, 7d", { default: "24h", min: 1 }),
    json: { ...json, help: "one JSON object on stdout instead of the table" },
  },
} satisfies CommandSpec

/** `bun run stats`: ledger statistics as a table or JSON. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values: v, texts }) => {
    const windowMs = v.window
    const windowText = texts.window ?? `${windowMs}ms`
    const queue = openQueue(resolveRoot(v.root))
    const since = new Date(Date.now() - windowMs)
    const url = resolveLedgerUrl(v.ledger)
    await checkRootLedger(queue, url)
    const stats =
      url !== undefined
        ? await sharedStatsOf(queue, url, since)
        : fs.existsSync(queue.ledger)
          ? statsOf(queue.ledger, since)
          : emptyStats(since)
    if (v.json) {
      const out = { root: queue.root, window: { text: windowText, ms: windowMs }, ...stats }
      process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
    } else {
      process.stdout.write(formatStats(stats, url === undefined ? queue.ledger : redact(url), windowText))
    }
    return ExitCode.ok
  })
}

async function sharedStatsOf(queue: Queue, url: string, since: Date): Promise<LedgerStats> {
  const ledger = await PostgresLedger.open(url, rootId(queue), { migrate: false })
  try {
    return await readSharedStats(ledger.sql, since)
  } finally {
    await ledger.close()
  }
}

function statsOf(path: string, since: Date): LedgerStats {
  const ledger = Ledger.open(path, { readonly: true })
  try {
    return readStats(ledger.db, since)
  } finally {
    ledger.close()
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
