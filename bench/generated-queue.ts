// The bench's queue: N messages, about 5% duplicates and 1% bad files, the same for every
// seed-fixed run, and a fresh root holding them for each contender.
import fs from "node:fs"
import { join } from "node:path"
import { dropPages, rng } from "@spool/test-support"
import { sh } from "./shell.ts"

/** The k-th distinct message: the same k gives the same bytes. */
export function message(k: number): string {
  const cents = (k * 7919) % 1_000_000
  return JSON.stringify({
    msg_id: `m-${k.toString(36).padStart(7, "0")}`,
    order_no: `A-${Math.floor(k / 5)}`,
    seq: (k % 5) + 1,
    currency: "EUR",
    customer: `Customer ${k % 977}`,
    sent_at: "2026-11-02T08:07:00Z",
  }).replace(/}$/, `,"amount":${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, "0")}}`)
}

const badKinds = [
  '{"msg_id": "bad-parse", "order_no": "A-1", "seq": 1, "amo', // parse: truncated
  '{"msg_id": "bad-missing", "order_no": "A-1", "seq": 1}', // missing-field: no amount
  '{"msg_id": "bad-invalid", "order_no": "A-1", "seq": 1, "amount": "lots"}', // invalid-field
]

/** What the generated queue holds, so every contender's end state can be checked against it. */
export interface Expected {
  readonly messages: number
  readonly distinct: number
  readonly duplicates: number
  readonly distinctDuplicateIds: number
  readonly bad: number
}

export function generate(inbox: string, n: number): Expected {
  const random = rng(20261129)
  let distinct = 0
  let duplicates = 0
  let bad = 0
  const dupIds = new Set<number>()
  for (let i = 0; i < n; i++) {
    const r = random()
    let body: string
    if (r < 0.01) body = badKinds[bad++ % badKinds.length] as string
    else if (r < 0.06 && distinct > 0) {
      const k = Math.floor(random() * distinct)
      dupIds.add(k)
      duplicates++
      body = message(k)
    } else body = message(distinct++)
    const name = `evt-${i.toString(36).padStart(7, "0")}-${Math.floor(random() * 0xffffffff).toString(16)}.json`
    fs.writeFileSync(join(inbox, name), body)
  }
  return { messages: n, distinct, duplicates, distinctDuplicateIds: dupIds.size, bad }
}

/** A queue root under `base` named `label` whose inbox/ holds the files of `master`. */
export function freshRoot(base: string, label: string, master: string, cold = false): string {
  const root = join(base, label)
  fs.mkdirSync(root)
  for (const d of ["processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d))
  // Hard links: a fresh directory of the same files in a fraction of a copy's time; every
  // contender renames its own directory entries and reads the same page-cached data.
  sh("cp", ["-al", master, join(root, "inbox")])
  sh("sync", [])
  if (cold) dropDirPages(join(root, "inbox"))
  return root
}

/**
 * Drops every file's pages in `dir` from the page cache (they are clean after the sync): the
 * next read of each goes to the disk, as for a file written long ago.
 */
export function dropDirPages(dir: string): void {
  for (const name of fs.readdirSync(dir)) {
    let fd: number
    try {
      fd = fs.openSync(join(dir, name), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
    } catch {
      continue // nothing opened, nothing cached to drop
    }
    const error = dropPages(fd)
    fs.closeSync(fd)
    if (error !== 0) throw new Error(`posix_fadvise(${join(dir, name)}, DONTNEED): error ${error}`)
  }
}
