import { join } from "node:path"
import { fault } from "../_fault.ts"
import { reportRow, workDone } from "../collect.ts"
import type { OrderProblem, OrderProblemRange } from "../ledger/model.ts"
import type { LedgerPort } from "../ledger/port.ts"
import { writeFileAtomic } from "../queue/atomic-write.ts"
import type { Queue } from "../queue/root.ts"
import { scanDir } from "../queue/scan.ts"

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
 * msg_id whose content differs), each atomically, under the ledger's report lock. On a shared
 * PostgreSQL ledger dup.txt and conflicts.csv cover the whole ledger (every root's deliveries),
 * error.csv this root's error/.
 */
export async function writeReports(queue: Queue, ledger: LedgerPort): Promise<void> {
  await ledger.withReportLock(async () => {
    writeFileAtomic(join(queue.root, reportFiles.duplicates), await linesOf(ledger.duplicateIds(), (id) => `${id}\n`))
    const reasons = await ledger.failureReasons()
    writeFileAtomic(
      join(queue.root, reportFiles.errors),
      errorRows(queue, (name) => reasons.get(name)),
    )
    writeFileAtomic(
      join(queue.root, reportFiles.conflicts),
      await linesOf(
        ledger.conflicts(),
        (c) => csvRow([c.msg_id, c.file, c.processed_file, c.content_hash, c.processed_content_hash]),
        "msg_id,file,processed_file,content_hash,processed_content_hash\n",
      ),
    )
  })
  fault("after-reports")
}

/**
 * A report's lines, one per row. Rows a ledger reads synchronously are streamed into the file as
 * it is written, so a report of any size takes no more memory than a row; rows it reads over the
 * network are gathered first (writeFileAtomic writes synchronously).
 */
async function linesOf<T>(
  rows: Iterable<T> | AsyncIterable<T>,
  line: (row: T) => string,
  header?: string,
): Promise<Iterable<string>> {
  if (Symbol.iterator in rows) return streamed(rows, line, header)
  const lines: string[] = header === undefined ? [] : [header]
  for await (const row of rows) {
    workDone(reportRow)
    lines.push(line(row))
  }
  return lines
}

function* streamed<T>(rows: Iterable<T>, line: (row: T) => string, header: string | undefined): Generator<string> {
  if (header !== undefined) yield header
  for (const row of rows) {
    workDone(reportRow)
    yield line(row)
  }
}

function* errorRows(queue: Queue, reasonOf: (file: string) => string | undefined): Generator<string> {
  yield "file,reason\n"
  for (const [name, reason] of errorEntries(queue, reasonOf)) {
    workDone(reportRow)
    yield csvRow([name, reason])
  }
}

/**
 * Every entry in error/ by name with the reason of its open failure (`unknown` where the ledger
 * has none), sorted: what error.csv lists and what stats counts as open, so a file removed by
 * hand drops out of both however the ledger was told.
 */
export function errorEntries(queue: Queue, reasonOf: (file: string) => string | undefined): [string, string][] {
  // error/ is expected to stay small (it is a to-do list for operators); sorting it gives a
  // report that does not depend on directory order.
  const names: string[] = []
  // Every entry counts, including the links, FIFOs and directories consume put there.
  for (const e of scanDir(queue.error)) names.push(e.name)
  names.sort()
  return names.map((name) => [name, reasonOf(name) ?? "unknown"])
}

/** The entries in error/ counted by the reason of their open failure (see errorEntries). */
export function openFailuresIn(queue: Queue, reasons: ReadonlyMap<string, string>): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const [, reason] of errorEntries(queue, (name) => reasons.get(name))) counts[reason] = (counts[reason] ?? 0) + 1
  return counts
}

/** The text of order-result.txt: `OK`, or a header and one CSV row per problem. */
export function formatOrderResult(problems: readonly OrderProblem[]): string {
  if (problems.length === 0) return "OK\n"
  return `order_no,seq,problem\n${problems.map((p) => csvRow([p.order_no, p.seq, p.problem])).join("")}`
}

/**
 * More rows than this, one per missing seq, and order-check lists its problems as ranges
 * instead: a gap of 2^53 seqs would take order-check.sql years and a file to match.
 */
export const maxOrderResultRows = 100_000

/** order-result.txt when its rows would be too many: a header and one CSV row per duplicate or run of missing seqs. */
export function formatOrderRanges(ranges: readonly OrderProblemRange[]): string {
  return `order_no,first_seq,last_seq,problem\n${ranges.map((r) => csvRow([r.order_no, r.first, r.last, r.problem])).join("")}`
}
