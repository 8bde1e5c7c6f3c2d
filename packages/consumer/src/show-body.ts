// `show --body`: the message itself, as postcat prints a queue file's content. The body is read
// from the directory that holds the file now; for a msg_id, from the file it was processed from,
// else a delivery of it, wherever one still is: the file whose bytes have the sha256 its ledger
// row recorded, under its name or the name~N.json a taken name became on its way to done/.
import fs from "node:fs"
import { join } from "node:path"
import { alternateName, type Queue, type QueueDir, queueDirs, quoteName } from "@spool/core/engine"
import type { ShowReport } from "./show.ts"

/** Where a shown message's bytes are, and the bytes. */
export interface ShownBody {
  readonly dir: QueueDir
  readonly file: string
  readonly bytes: Uint8Array
}

/** A file of the report that is in the queue but has no bytes to print: a link, a FIFO, a directory. */
interface NotRegular {
  readonly dir: QueueDir
  readonly file: string
  readonly kind: string
}

/** How many name~N.json alternatives of a recorded name are looked at for its bytes. */
const maxAlternatives = 100

/**
 * The body of what `report` shows; undefined when no file of it is in the queue's directories
 * any more, or only as an entry that is not a regular file (noBodyLine says which).
 */
export function bodyOf(queue: Queue, report: ShowReport): ShownBody | undefined {
  if (report.kind === "file") {
    for (const dir of queueDirs) {
      const body = regularFile(queue, dir, report.query)
      if (body !== undefined) return body
    }
    return undefined
  }
  const h = report.history
  for (const { file, payloadHash } of [...h.processed, ...h.duplicates]) {
    if (file.includes("/") || file.includes("\0")) continue
    for (const dir of queueDirs)
      for (let k = 0; k <= maxAlternatives; k++) {
        const name = k === 0 ? file : alternateName(file, k)
        if (k > 0 && !fs.existsSync(join(queue[dir], name))) break
        const body = regularFile(queue, dir, name)
        if (body !== undefined && Bun.CryptoHasher.hash("sha256", body.bytes, "hex") === payloadHash) return body
      }
  }
  return undefined
}

function regularFile(queue: Queue, dir: QueueDir, file: string): ShownBody | undefined {
  const path = join(queue[dir], file)
  return fs.lstatSync(path, { throwIfNoEntry: false })?.isFile() === true
    ? { dir, file, bytes: fs.readFileSync(path) }
    : undefined
}

/** The entry of a file report that is in the queue but is not a regular file, if there is one. */
function notRegular(queue: Queue, report: ShowReport): NotRegular | undefined {
  if (report.kind !== "file") return undefined
  for (const dir of queueDirs) {
    const st = fs.lstatSync(join(queue[dir], report.query), { throwIfNoEntry: false })
    if (st === undefined || st.isFile()) continue
    const kind = st.isSymbolicLink()
      ? "a symbolic link"
      : st.isDirectory()
        ? "a directory"
        : st.isFIFO()
          ? "a FIFO"
          : st.isSocket()
            ? "a socket"
            : "a device"
    return { dir, file: report.query, kind }
  }
  return undefined
}

/** The body after the report: a header line naming the file, then its bytes as they are, ending in a newline. */
export function formatBody(body: ShownBody): Uint8Array {
  const head = `\n-- body of ${body.dir}/${quoteName(body.file)}, ${body.bytes.length} bytes --\n`
  const tail = body.bytes.at(-1) === 0x0a || body.bytes.length === 0 ? "" : "\n"
  return Buffer.concat([Buffer.from(head), body.bytes, Buffer.from(tail)])
}

/** What to say when a body was asked for and none can be printed. */
export function noBodyLine(queue: Queue, report: ShowReport): string {
  const entry = notRegular(queue, report)
  if (entry !== undefined)
    return `show: --body: ${entry.dir}/${quoteName(entry.file)} is ${entry.kind}, not a regular file: it has no bytes of its own to print (spool never reads such an entry)\n`
  const which = report.kind === "file" ? "no file of" : "no file with the bytes the ledger recorded for"
  return `show: --body: ${which} ${quoteName(report.query)} is in the queue's directories (compact archived or deleted it, or it was removed); the report above is what the ledger knows\n`
}
