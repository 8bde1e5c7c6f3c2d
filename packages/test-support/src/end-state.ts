// Queue end states to compare runs by: each directory's files and the ledger's rows, on either backend.
import { Database } from "bun:sqlite"
import fs from "node:fs"
import { join } from "node:path"
import { SQL } from "bun"

/** The names of the entries directly in a directory, sorted. */
export function list(dir: string): string[] {
  try {
    return fs.readdirSync(dir).sort()
  } catch {
    return []
  }
}

/**
 * Everything that defines a queue's end state, timestamps aside: file names and bytes per
 * directory, ledger rows, dup.txt and error.csv. Two runs are equivalent when these are equal.
 */
export function snapshot(root: string) {
  const files = (d: string) => fileHashes(join(root, d))
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    return {
      inbox: files("inbox"),
      processing: files("processing"),
      done: files("done"),
      error: files("error"),
      processed: db
        .query("SELECT msg_id, order_no, seq, amount, file, payload_hash FROM processed ORDER BY msg_id")
        .all(),
      duplicates: db
        .query("SELECT msg_id, file, payload_hash, is_conflict FROM duplicates ORDER BY msg_id, file")
        .all(),
      failures: db.query("SELECT file, original, reason FROM failures ORDER BY file").all(),
      claims: db.query("SELECT name FROM claims").all(),
      dupTxt: readOr(join(root, "dup.txt")),
      errorCsv: readOr(join(root, "error.csv")),
    }
  } finally {
    db.close()
  }
}

/** A queue's end state, as `snapshot` and `endState` return it. */
export type Snapshot = ReturnType<typeof snapshot>

/**
 * `snapshot` for either backend: the ledger rows from PostgreSQL when `ledgerUrl` is given (a
 * database that holds this one root), with the same columns and types as the SQLite snapshot.
 */
export async function endState(root: string, ledgerUrl?: string): Promise<Snapshot> {
  if (ledgerUrl === undefined) return snapshot(root)
  const files = (d: string) => fileHashes(join(root, d))
  const sql = new SQL({ url: ledgerUrl, max: 1 })
  try {
    const rows = async (q: Promise<unknown[]>) => (await q).map((r) => ({ ...(r as object) }))
    return {
      inbox: files("inbox"),
      processing: files("processing"),
      done: files("done"),
      error: files("error"),
      processed: await rows(
        sql`SELECT msg_id, order_no, seq::int AS seq, amount, file, payload_hash FROM processed ORDER BY msg_id COLLATE "C"`,
      ),
      duplicates: await rows(
        sql`SELECT msg_id, file, payload_hash, is_conflict::int AS is_conflict FROM duplicates ORDER BY msg_id COLLATE "C", file COLLATE "C"`,
      ),
      failures: await rows(sql`SELECT file, original, reason FROM failures ORDER BY file COLLATE "C"`),
      claims: await rows(sql`SELECT name FROM claims`),
      dupTxt: readOr(join(root, "dup.txt")),
      errorCsv: readOr(join(root, "error.csv")),
    }
  } finally {
    await sql.close()
  }
}

/** Each entry of `dir` with the sha256 of its bytes ("non-file" for anything but a regular file). */
export function fileHashes(dir: string): Record<string, string> {
  return Object.fromEntries(
    list(dir).map((n) => {
      const p = join(dir, n)
      const st = fs.lstatSync(p)
      return [n, st.isFile() ? new Bun.CryptoHasher("sha256").update(fs.readFileSync(p)).digest("hex") : "non-file"]
    }),
  )
}

function readOr(path: string): string | undefined {
  try {
    return fs.readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}
