import { type CommandSpec, json, ledger, root, runCommand } from "@spool/cli"
import {
  ExitCode,
  type LedgerCheck,
  openExistingLedger,
  openQueue,
  redact,
  resolveLedgerUrl,
  resolveRoot,
} from "@spool/core/engine"

/** `bun run verify`'s options and help. */
export const spec = {
  name: "verify",
  usage: "bun run verify [--root DIR] [--ledger URL] [--json]",
  summary: "Checks the ledger's integrity and spool's own rules; exit 1 when one fails.",
  description:
    "SQLite: the full PRAGMA integrity_check (every page, and every index entry against\n" +
    "its table row: the damage consume's quick_check cannot see), then spool's own rules, read from the tables\n" +
    "without the indexes they check: no msg_id with two processed rows, no file with two claims, no claim\n" +
    "whose owner has no consumers row. PostgreSQL: amcheck on every index of spool's tables when the\n" +
    "extension is installed, and the same rules with index scans off. Read-only: safe while consumers run,\n" +
    "but it reads the whole ledger.",
  options: {
    root,
    ledger,
    json: { ...json, help: "one JSON object on stdout: root, ledger, backend, ok, checks" },
  },
  exitCodes: [0, 1, 2, 3],
  examples: [
    { args: "--root /srv/spool/orders", does: "check the ledger, one line per check" },
    { args: "--root /srv/spool/orders --json", does: "the same as one JSON object" },
  ],
} satisfies CommandSpec

/** `bun run verify`: the ledger's integrity and spool's consistency checks. Exit 1 when one fails. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values: v, quiet }) => {
    const queue = openQueue(resolveRoot(v.root))
    const url = resolveLedgerUrl(v.ledger)
    const ledger = await openExistingLedger(queue, { url, readonly: true, isLostLedgerRefused: true })
    const where = url === undefined ? queue.ledger : redact(url)
    if (ledger === undefined) {
      // No consume has run on this root: nothing to check, which is not a failure.
      if (quiet) return ExitCode.ok
      if (v.json) {
        const out = { root: queue.root, ledger: where, backend: null, ok: true, checks: [] }
        process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
      } else
        process.stdout.write(
          `spool verify for ${where}\n\nno ledger yet, nothing to check: no consume has run on this root\n`,
        )
      return ExitCode.ok
    }
    let checks: LedgerCheck[]
    try {
      checks = await ledger.verify()
    } finally {
      await ledger.close()
    }
    const failed = checks.filter((c) => c.status === "failed")
    if (quiet && failed.length === 0) return ExitCode.ok
    if (v.json) {
      const out = { root: queue.root, ledger: where, backend: ledger.backend, ok: failed.length === 0, checks }
      process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
    } else process.stdout.write(formatChecks(checks, where))
    if (failed.length === 0) return ExitCode.ok
    process.stderr.write(
      `verify: ${failed.map((c) => c.name).join(", ")} failed. Stop every consumer on ${url === undefined ? "this root" : "this ledger"} so that nothing more is written to it; docs/maintenance.md, What spool checks, says what each failure means and what to do\n`,
    )
    return ExitCode.check
  })
}

/** The human report of `bun run verify`: one line per check, its problems indented under it. */
export function formatChecks(checks: readonly LedgerCheck[], ledger: string): string {
  const width = Math.max(...checks.map((c) => c.name.length))
  const lines = [`spool verify for ${ledger}`, ""]
  for (const c of checks) {
    const status = { ok: "ok", failed: "FAILED", skipped: "skipped" }[c.status]
    lines.push(`${status.padEnd(7)}  ${c.name.padEnd(width)}  ${c.description}`)
    for (const p of c.problems) lines.push(`         ${p}`)
    if (c.found > c.problems.length) lines.push(`         ... and ${c.found - c.problems.length} more`)
    if (c.note !== undefined) lines.push(`         ${c.note}`)
  }
  return `${lines.join("\n")}\n`
}
