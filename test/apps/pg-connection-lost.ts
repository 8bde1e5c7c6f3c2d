// A consume run on a PostgreSQL ledger whose database connection is cut (pg_terminate_backend)
// while it commits FILE, the first TIMES times FILE is committed (counted in the file COUNTER
// across runs): a transient database fault, which ends the run cleanly with exit 3, not a crash.
// Used by postgres.test.ts. Run: bun test/apps/pg-connection-lost.ts ROOT URL FILE TIMES COUNTER
import fs from "node:fs"
import { consume, openPostgresLedger, openQueue, type PostgresEffect } from "@spool/core/engine"

const [root, url, file, times, counter] = process.argv.slice(2) as [string, string, string, string, string]
const queue = openQueue(root)
const ledger = await openPostgresLedger(queue, { url })
const cutOnce: PostgresEffect = async (outcome, tx) => {
  if (outcome.name !== file) return
  const cuts = fs.existsSync(counter) ? Number(fs.readFileSync(counter, "utf8")) : 0
  if (cuts >= Number(times)) return
  fs.writeFileSync(counter, String(cuts + 1))
  await tx`SELECT pg_terminate_backend(pg_backend_pid())`
}
try {
  await consume({ queue, ledger, effect: cutOnce })
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
  process.exitCode = 3
} finally {
  await ledger.close()
}
