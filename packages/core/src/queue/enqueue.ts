import fs from "node:fs"
import { join } from "node:path"
import { SpoolError } from "../errors.ts"
import { fsyncDir, maxMessageBytes, openDir, renameNoReplace } from "./files.ts"
import { fitsNameMax, quoteName } from "./names.ts"
import { isMessageName, type Queue, queueDirs } from "./root.ts"
import { entryName, entryPath, scanDir } from "./scan.ts"

/** What putting files into a queue did. */
interface EnqueueSummary {
  copied: number
  /** Names already somewhere in the queue: never overwritten, never delivered twice by setup. */
  skipped: string[]
}

/** Why `name` cannot be a message's name in inbox/, or undefined when it can. */
export function messageNameProblem(name: string): string | undefined {
  if (name.includes("/")) return `${quoteName(name)} is not a message file name: it must contain no /`
  if (!isMessageName(name))
    return `${quoteName(name)} is not a message file name: it must end in .json and not start with a dot`
  if (!fitsNameMax(name))
    return `${quoteName(name)} is not a message file name: it is ${Buffer.byteLength(name)} bytes in UTF-8, and a file name holds at most 255`
  return undefined
}

/**
 * Puts one message into inbox/ atomically, the Maildir way: written and fsynced under tmp/,
 * then renamed into inbox/ without replacing anything. A consumer never sees half a file.
 * Returns false (and leaves nothing behind) when inbox/ already has that name.
 */
export function enqueueBytes(queue: Queue, name: string, data: Uint8Array | string, durable = true): boolean {
  const problem = messageNameProblem(name)
  if (problem !== undefined) throw new SpoolError("usage", problem)
  // Not derived from `name`: a 255-byte name plus a prefix would be too long for the filesystem.
  const tmp = join(queue.tmp, `${process.pid}.${crypto.randomUUID()}.tmp`)
  const fd = fs.openSync(tmp, "wx", 0o644)
  try {
    // write(2) may write less than asked (a disk filling up): a short file must never reach inbox/.
    const bytes = typeof data === "string" ? Buffer.from(data) : data
    for (let off = 0; off < bytes.length; ) off += fs.writeSync(fd, bytes, off, bytes.length - off)
    if (durable) fs.fsyncSync(fd)
  } catch (error) {
    fs.closeSync(fd)
    fs.rmSync(tmp, { force: true })
    throw error
  }
  fs.closeSync(fd)
  const moved = renameNoReplace(tmp, join(queue.inbox, name))
  if (moved !== "moved") {
    fs.rmSync(tmp, { force: true })
    return false
  }
  if (durable) {
    const dfd = openDir(queue.inbox)
    try {
      fsyncDir(dfd)
    } finally {
      fs.closeSync(dfd)
    }
  }
  return true
}

/** The refusal of an input larger than any message consume can take (1 GiB). */
export function tooLargeInput(what: string, size: number): SpoolError {
  return new SpoolError(
    "usage",
    `${what} is ${size} bytes, larger than any message consume can take (at most 1 GiB, read whole into memory); nothing was enqueued`,
  )
}

/**
 * Copies every regular `*.json` file directly in `from` into inbox/ (no subdirectories, no
 * links, no `.json.tmp`). A name already present anywhere in the queue is skipped, so seeding
 * twice neither duplicates nor overwrites a message.
 */
export function seedFrom(queue: Queue, from: string): EnqueueSummary {
  let st: fs.Stats
  try {
    st = fs.statSync(from)
  } catch {
    throw new SpoolError("usage", `--from ${from} does not exist; give a directory of .json message files`)
  }
  if (!st.isDirectory()) throw new SpoolError("usage", `--from ${from} is not a directory`)
  // Before anything is copied: a file no consume could take is named, and nothing is seeded.
  for (const e of scanDir(from)) {
    const size = fs.lstatSync(entryPath(from, e), { throwIfNoEntry: false })
    if (isMessageName(entryName(e)) && size?.isFile() === true && size.size > maxMessageBytes)
      throw tooLargeInput(`--from ${from} holds ${quoteName(entryName(e))}, which`, size.size)
  }
  const summary: EnqueueSummary = { copied: 0, skipped: [] }
  for (const e of scanDir(from)) {
    // A name that is not UTF-8 is read by its bytes and enqueued under its %XX spelling, the
    // name consume would give it in inbox/.
    const name = entryName(e)
    if (!isMessageName(name)) continue
    const src = entryPath(from, e)
    if (!fs.lstatSync(src).isFile()) continue
    if (queueDirs.some((d) => fs.existsSync(join(queue[d], name)))) {
      summary.skipped.push(name)
      continue
    }
    if (enqueueBytes(queue, name, fs.readFileSync(src))) summary.copied++
    else summary.skipped.push(name)
  }
  return summary
}
