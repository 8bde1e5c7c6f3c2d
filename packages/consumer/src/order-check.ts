import { join } from "node:path"
import { type CommandSpec, ledger, root, runCommand } from "@spool/cli"
import {
  ExitCode,
  formatOrderResult,
  openLedger,
  openQueue,
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
    "sqlite3 ROOT/ledger.db < ROOT/order-check.sql) and writes ROOT/order-result.txt: OK, or the problems.",
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
    const ledger = await openLedger(queue, { url: resolveLedgerUrl(values.ledger) })
    try {
      const problems = await ledger.orderProblems()
      writeFileAtomic(join(queue.root, reportFiles.orderCheck), orderCheckSql)
      const text = formatOrderResult(problems)
      writeFileAtomic(join(queue.root, reportFiles.orderResult), text)
      // Quiet: the problems are still said, since they need a person; OK is not.
      if (!quiet || problems.length > 0) process.stdout.write(text)
      return problems.length === 0 ? ExitCode.ok : ExitCode.check
    } finally {
      await ledger.close()
    }
  })
}
