// `show --body`: the message itself, as postcat prints a queue file's content. The body is read
// from the directory that holds the file now; for a msg_id, from the file it was processed from,
// else a delivery of it, wherever one still is.
import fs from "node:fs"
import { join } from "node:path"
import { type Queue, type QueueDir, queueDirs, quoteName } from "@spool/core/engine"
import type { ShowReport } from "./show.ts"

/** Where a shown message's bytes are, and the bytes. */
export interface ShownBody {
  readonly dir: QueueDir
  readonly file: string
  readonly bytes: Uint8Array
}

/** The body of what `report` shows, or undefined when no file of it is in the queue's directories any more. */
export function bodyOf(queue: Queue, report: ShowReport): ShownBody | undefined {
  const names =
    report.kind === "file"
      ? [report.query]
      : [...report.history.processed.map((p) => p.file), ...report.history.duplicates.map((d) => d.file)]
  for (const file of names) {
    if (file.includes("/") || file.includes("\0")) continue
    for (const dir of queueDirs) {
      const path = join(queue[dir], file)
      if (fs.lstatSync(path, { throwIfNoEntry: false })?.isFile() === true)
        return { dir, file, bytes: fs.readFileSync(path) }
    }
  }
  return undefined
}

/** The body after the report: a header line naming the file, then its bytes as they are, ending in a newline. */
export function formatBody(body: ShownBody): Uint8Array {
  const head = `\n-- body of ${body.dir}/${quoteName(body.file)}, ${body.bytes.length} bytes --\n`
  const tail = body.bytes.at(-1) === 0x0a || body.bytes.length === 0 ? "" : "\n"
  return Buffer.concat([Buffer.from(head), body.bytes, Buffer.from(tail)])
}

/** What to say when a body was asked for and no file of it remains. */
export function noBodyLine(report: ShowReport): string {
  return `show: --body: no file of ${quoteName(report.query)} is in the queue's directories (compact archived or deleted it, or it was removed); the report above is what the ledger knows\n`
}
