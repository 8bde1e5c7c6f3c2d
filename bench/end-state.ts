// The checks that a run left the queue and its ledger exactly as the generated data says.
import { Database } from "bun:sqlite"
import fs from "node:fs"
import { join } from "node:path"
import type { Expected } from "./generated-queue.ts"

export function countEntries(dir: string): number {
  let n = 0
  const d = fs.opendirSync(dir, { bufferSize: 1024 })
  while (d.readSync() !== null) n++
  d.closeSync()
  return n
}

function rowCount(db: string): number {
  const d = new Database(db, { readonly: true })
  try {
    return (d.query("SELECT count(*) AS n FROM processed").get() as { n: number }).n
  } finally {
    d.close()
  }
}

/**
 * Throws unless the queue ended exactly as the generated data says it must. `db` is a SQLite
 * ledger's path or the row count read from another ledger.
 */
export function check(label: string, root: string, db: string | number, e: Expected, isConsume: boolean): void {
  const problems: string[] = []
  const expect = (what: string, got: number, want: number) => {
    if (got !== want) problems.push(`${what}: ${got}, expected ${want}`)
  }
  expect("inbox/", countEntries(join(root, "inbox")), 0)
  expect("processing/", countEntries(join(root, "processing")), 0)
  expect("done/", countEntries(join(root, "done")), e.distinct + e.duplicates)
  expect("error/", countEntries(join(root, "error")), e.bad)
  expect("processed rows", typeof db === "number" ? db : rowCount(db), e.distinct)
  if (isConsume) {
    const dup = fs.readFileSync(join(root, "dup.txt"), "utf8")
    expect("dup.txt lines", dup === "" ? 0 : dup.trimEnd().split("\n").length, e.distinctDuplicateIds)
    const csv = fs.readFileSync(join(root, "error.csv"), "utf8").trimEnd().split("\n")
    expect("error.csv rows", csv.length - 1, e.bad)
  }
  if (problems.length > 0) throw new Error(`${label}: wrong end state: ${problems.join("; ")}`)
}

/** Throws unless the renames contender moved every file, bad ones included, to done/ (it reads none). */
export function renamedAll(label: string, root: string, e: Expected): void {
  const got = ["inbox", "processing", "done", "error"].map((d) => countEntries(join(root, d)))
  if (got.join() !== [0, 0, e.messages, 0].join())
    throw new Error(
      `${label}: wrong end state: inbox/, processing/, done/, error/ hold ${got.join(", ")}, expected 0, 0, ${e.messages}, 0`,
    )
}

/** Throws unless all `n` files of the watch run reached done/ and none is left behind. */
export function expectDone(root: string, n: number): void {
  const got = [
    countEntries(join(root, "done")),
    countEntries(join(root, "inbox")),
    countEntries(join(root, "processing")),
  ]
  if (got[0] !== n || got[1] !== 0 || got[2] !== 0)
    throw new Error(`watch: wrong end state: done/ ${got[0]} (want ${n}), inbox/ ${got[1]}, processing/ ${got[2]}`)
}
