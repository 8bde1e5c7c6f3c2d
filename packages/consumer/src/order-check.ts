import { join } from "node:path"
import { type CommandSpec, runCommand } from "@spool/cli"
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

const spec = {
  name: "order-check",
  usage: "bun run order-check [--root DIR]",
  summary:
    "Runs order-check.sql against ROOT/ledger.db: every order_no whose stored seq values are duplicated or\n" +
    "have a gap in 1..max(seq). Copies the SQL to ROOT/order-check.sql (run it yourself with\n" +
    "sqlite3 ROOT/ledger.db < ROOT/order-check.sql) and writes ROOT/order-result.txt: OK, or the problems.",
  options: { root: { type: "string" }, ledger: { type: "string" } },
  help: [
    "--root DIR            queue root (default: $SPOOL_ROOT, else ./spool)",
    "--ledger URL          a postgres:// ledger (default: $SPOOL_LEDGER_URL, else SQLite in ROOT/ledger.db)",
  ],
} satisfies CommandSpec<Record<string, { type: "string" }>>

/** `bun run order-check`: per-order sequence gaps and duplicates. Exit 1 when any are found. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values }) => {
    const queue = openQueue(resolveRoot(values.root))
    const ledger = await openLedger(queue, { url: resolveLedgerUrl(values.ledger) })
    try {
      const problems = await ledger.orderProblems()
      writeFileAtomic(join(queue.root, reportFiles.orderCheck), orderCheckSql)
      const text = formatOrderResult(problems)
      writeFileAtomic(join(queue.root, reportFiles.orderResult), text)
      process.stdout.write(text)
      return problems.length === 0 ? ExitCode.ok : ExitCode.check
    } finally {
      await ledger.close()
    }
  })
}
