import { join } from "node:path"
import { fault } from "./_fault.ts"
import { reportRow, workDone } from "./collect.ts"
import { writeFileAtomic } from "./files.ts"
import type { Ledger, OrderProblem } from "./ledger.ts"
import type { LedgerPort } from "./ledger-port.ts"
import { PostgresLedger } from "./ledger-postgres.ts"
import { type Queue, scanDir } from "./queue.ts"

/** Report files written into the queue root. */
export const reportFiles = {
  duplicates: "dup.txt",
  errors: "error.csv",
  conflicts: "conflicts.csv",
  schema: "schema.csv",
  orderCheck: "order-check.sql",
  orderResult: "order-result.txt",
} as const

/** Quotes one CSV field per RFC 4180: quoted when it holds a comma, quote, CR or LF. */
export function csvField(value: string | number): string {
  // Exact, never altered: a formula guard (a ' before = + - @) would make a name copied from
  // error.csv one that replay cannot find. Spreadsheets should import the reports as text.
  const s = String(value)
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s
}

/** One CSV record, CRLF-free: RFC 4180 allows LF line ends and every tool reads them. */
export function csvRow(fields: readonly (string | number)[]): string {
  return `${fields.map(csvField).join(",")}\n`
}

/**
 * Rewrites dup.txt (every msg_id ever ignored as a duplicate, distinct, ascending), error.csv
 * (one row per file now in error/, by name) and conflicts.csv (redeliveries of a processed
 * msg_id whose content differs), each atomically.
 */
export async function writeReports(queue: Queue, ledger: LedgerPort): Promise<void> {
  if (ledger instanceof PostgresLedger) await writeSharedReports(queue, ledger)
  else writeLocalReports(queue, ledger as Ledger)
  fault("after-reports")
}

function writeLocalReports(queue: Queue, ledger: Ledger): void {
  // Under the ledger's write lock: no commit lands between reading the ledger and renaming the
  // reports into place, and concurrent consumers write one after the other, so the last
  // report written reflects every commit and move before it.
  ledger.transaction(() => {
    writeFileAtomic(
      join(queue.root, reportFiles.duplicates),
      (function* () {
        for (const id of ledger.duplicateIds()) {
          workDone(reportRow)
          yield `${id}\n`
        }
      })(),
    )
    writeFileAtomic(
      join(queue.root, reportFiles.errors),
      errorRows(queue, (name) => ledger.failureReason(name)),
    )
    writeFileAtomic(
      join(queue.root, reportFiles.conflicts),
      (function* () {
        yield "msg_id,file,processed_file,content_hash,processed_content_hash\n"
        for (const c of ledger.conflicts()) {
          workDone(reportRow)
          yield csvRow([c.msg_id, c.file, c.processed_file, c.content_hash, c.processed_content_hash])
        }
      })(),
    )
  })
}

/**
 * The same reports from a shared PostgreSQL ledger, under the root's report lock. dup.txt and
 * conflicts.csv cover the whole ledger (every root's deliveries); error.csv this root's error/.
 */
async function writeSharedReports(queue: Queue, ledger: PostgresLedger): Promise<void> {
  await ledger.withReportLock(async () => {
    const ids: string[] = []
    for await (const id of ledger.duplicateIds()) {
      workDone(reportRow)
      ids.push(`${id}\n`)
    }
    const conflicts: string[] = ["msg_id,file,processed_file,content_hash,processed_content_hash\n"]
    for await (const c of ledger.conflicts())
      conflicts.push(csvRow([c.msg_id, c.file, c.processed_file, c.content_hash, c.processed_content_hash]))
    const reasons = await ledger.failureReasons()
    writeFileAtomic(join(queue.root, reportFiles.duplicates), ids)
    writeFileAtomic(
      join(queue.root, reportFiles.errors),
      errorRows(queue, (name) => reasons.get(name)),
    )
    writeFileAtomic(join(queue.root, reportFiles.conflicts), conflicts)
  })
}

function* errorRows(queue: Queue, reasonOf: (file: string) => string | undefined): Generator<string> {
  yield "file,reason\n"
  // error/ is expected to stay small (it is a to-do list for operators); sorting it gives a
  // report that does not depend on directory order.
  const names: string[] = []
  // Every entry counts, including the links, FIFOs and directories consume put there.
  for (const e of scanDir(queue.error)) names.push(e.name)
  names.sort()
  for (const name of names) {
    workDone(reportRow)
    yield csvRow([name, reasonOf(name) ?? "unknown"])
  }
}

/** The text of order-result.txt: `OK`, or a header and one CSV row per problem. */
export function formatOrderResult(problems: readonly OrderProblem[]): string {
  if (problems.length === 0) return "OK\n"
  return `order_no,seq,problem\n${problems.map((p) => csvRow([p.order_no, p.seq, p.problem])).join("")}`
}
