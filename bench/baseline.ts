// The per-message-commit consumer, written the way a tutorial would: for each inbox/*.json,
// rename it into processing/, read it, JSON.parse it, INSERT OR IGNORE in its own transaction,
// rename it to done/ or error/. No batching, no directory fsyncs, no claims: the yardstick
// consume is compared to.
//
// By default the ledger keeps SQLite's own settings, as a tutorial (or Python's sqlite3, or
// `new Database(path)` in Bun) leaves them: a rollback journal and synchronous=FULL, so each
// commit creates, syncs and deletes a journal and syncs the database. With --wal it is the
// careful variant: WAL and synchronous=FULL, one fsync per message.
//
// Usage: bun bench/baseline.ts [--wal] ROOT DB   prints one JSON object on stdout
import { Database } from "bun:sqlite"
import fs from "node:fs"
import { join } from "node:path"

const args = process.argv.slice(2)
const wal = args[0] === "--wal"
const [root, dbPath] = wal ? args.slice(1) : args
if (root === undefined || dbPath === undefined) {
  process.stderr.write("usage: bun bench/baseline.ts [--wal] ROOT DB\n")
  process.exit(2)
}

const started = performance.now()
const db = new Database(dbPath, { create: true })
if (wal) {
  db.exec("PRAGMA journal_mode = WAL")
  db.exec("PRAGMA synchronous = FULL")
}
// Recorded with the figures: the settings every commit actually ran with.
const settings = {
  journalMode: (db.query("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode,
  synchronous: (db.query("PRAGMA synchronous").get() as { synchronous: number }).synchronous,
}
db.exec(
  "CREATE TABLE IF NOT EXISTS processed (msg_id TEXT PRIMARY KEY, order_no TEXT NOT NULL, seq INTEGER NOT NULL, amount TEXT NOT NULL)",
)
const insert = db.prepare("INSERT OR IGNORE INTO processed (msg_id, order_no, seq, amount) VALUES (?, ?, ?, ?)")

const dir = (d: string) => join(root, d)
let done = 0
let error = 0
for (;;) {
  let claimed = 0
  for (const name of fs.readdirSync(dir("inbox"))) {
    if (!name.endsWith(".json") || name.startsWith(".")) continue
    const path = join(dir("processing"), name)
    try {
      fs.renameSync(join(dir("inbox"), name), path)
    } catch {
      continue
    }
    claimed++
    let m: { msg_id?: unknown; order_no?: unknown; seq?: unknown; amount?: unknown } | null | undefined
    try {
      m = JSON.parse(fs.readFileSync(path, "utf8"))
    } catch {}
    const ok =
      typeof m === "object" &&
      m !== null &&
      typeof m.msg_id === "string" &&
      typeof m.order_no === "string" &&
      Number.isInteger(m.seq) &&
      typeof m.amount === "number"
    if (ok && m) insert.run(m.msg_id as string, m.order_no as string, m.seq as number, String(m.amount))
    fs.renameSync(path, join(dir(ok ? "done" : "error"), name))
    if (ok) done++
    else error++
  }
  if (claimed === 0) break
}
db.close()
process.stdout.write(`${JSON.stringify({ done, error, ...settings, seconds: (performance.now() - started) / 1000 })}\n`)
