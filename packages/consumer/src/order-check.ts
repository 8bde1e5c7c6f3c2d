import { join } from "node:path"
import { type CommandSpec, ledger, root, runCommand } from "@spool/cli"
import {
  ExitCode,
  formatOrderRanges,
  formatOrderResult,
  maxOrderResultRows,
  openExistingLedger,
  openQueue,
  orderResultRows,
  reportFiles,
  resolveLedgerUrl,
  resolveRoot,
  writeFileAtomic,
} from "@spool/core/engine"
import orderCheckSql from "@spool/core/sql/order-check.sql" with { type: "text" }

/** `bun run order-check`'s options and help. */
export const spec = {
  name: "order-check",
  usage: "bun run order-check [--root DIR] [--ledger URL]",
  summary: "Finds orders whose seq values are duplicated or have gaps; exit 1 when any are found.",
  description:
    "Runs order-check.sql against the ledger: every order_no whose stored seq values are duplicated or\n" +
    "have a gap in 1..max(seq). Copies the SQL to ROOT/order-check.sql (run it yourself with\n" +
    "sqlite3 ROOT/ledger.db < ROOT/order-check.sql) and writes ROOT/order-result.txt: OK, or the problems.\n" +
    `Where the SQL would give over ${maxOrderResultRows.toLocaleString("en-US")} rows (one per missing seq), each duplicate and each run\n` +
    "of missing seqs is one row instead: order_no,first_seq,last_seq,problem.",
  options: { root, ledger },
  exitCodes: [0, 1, 2, 3],
  examples: [
    { args: "--root /srv/spool/orders", does: "print OK or the orders whose seqs are duplicated or have gaps" },
    { args: "--root /srv/spool/orders -q || mail -s 'order gaps' ops", does: "mail only when an order has a problem" },
  ],
} satisfies CommandSpec

/** `bun run order-check`: per-order sequence gaps and duplicates. Exit 1 when any are found. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values, quiet }) => {
    const queue = openQueue(resolveRoot(values.root))
    const url = resolveLedgerUrl(values.ledger)
    // Read-only, and nothing created where no consume has run yet: a ledger made here would bind
    // the root to SQLite before its first consume could choose PostgreSQL.
    const ledger = await openExistingLedger(queue, { url, readonly: true, isLostLedgerRefused: true })
    try {
      // The ranges first: order-check.sql writes a row for every missing seq, and a seq is up to
      // 2^53 - 1, so one wide gap would keep it (and a PostgreSQL server) busy for good.
      // Both read in one snapshot: a consumer committing meanwhile cannot make order-check.sql list more.
      const { ranges, problems } =
        ledger === undefined ? { ranges: [], problems: [] } : await ledger.orderCheck(maxOrderResultRows)
      const text = problems === undefined ? formatOrderRanges(ranges) : formatOrderResult(problems)
      writeFileAtomic(join(queue.root, reportFiles.orderCheck), orderCheckSql)
      writeFileAtomic(join(queue.root, reportFiles.orderResult), text)
      if (problems === undefined)
        process.stderr.write(
          `order-check: ${orderResultRows(ranges)} problem rows, more than the ${maxOrderResultRows} listed one by one: each run of missing seqs is one row (first_seq,last_seq); order-check.sql itself would list every seq\n`,
        )
      // Quiet: the problems are still said, since they need a person; OK is not.
      if (!quiet || ranges.length > 0) process.stdout.write(text)
      return ranges.length === 0 ? ExitCode.ok : ExitCode.check
    } finally {
      await ledger?.close()
    }
  })
}
