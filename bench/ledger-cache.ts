// What the ledger's page cache buys (PRAGMA cache_size in packages/core/src/ledger/sqlite/open.ts, 8 MiB): inserts of
// random msg_ids (UUIDs, as many producers use) into a table shaped like `processed` (the
// same columns and indexes: the msg_id primary key, the claim_id unique index, processed_at)
// in 1000-row transactions, once per cache size, alternating. synchronous=OFF, so the figures
// are the B-tree and page work, not the disk's fsync.
//
// Usage: bun bench/ledger-cache.ts [ROWS=1000000] [KIB,KIB,...=16384,4096,2048] [ROUNDS=2]
import { Database } from "bun:sqlite"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"

const rows = Number(process.argv[2] ?? 1_000_000)
const sizes = (process.argv[3] ?? "16384,4096,2048").split(",").map(Number)
const rounds = Number(process.argv[4] ?? 2)
if (!(rows >= 1000) || sizes.some((s) => !(s > 0)) || !(rounds >= 1)) {
  process.stderr.write("usage: bun bench/ledger-cache.ts [ROWS>=1000] [KIB,KIB,...] [ROUNDS>=1]\n")
  process.exit(2)
}

const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-ledger-cache-"))
try {
  for (let round = 1; round <= rounds; round++)
    for (const kib of sizes) {
      const r = run(join(dir, `${kib}.db`), kib)
      console.log(
        `round ${round} cache ${kib} KiB: ${r.seconds.toFixed(2)} s, cpu ${r.user.toFixed(2)} user + ${r.system.toFixed(2)} system`,
      )
    }
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}

function run(path: string, kib: number): { seconds: number; user: number; system: number } {
  const db = new Database(path, { create: true })
  db.exec("PRAGMA journal_mode = WAL")
  db.exec("PRAGMA synchronous = OFF")
  db.exec("PRAGMA wal_autocheckpoint = 10000")
  db.exec(`PRAGMA cache_size = -${kib}`)
  db.exec(`CREATE TABLE processed (
    msg_id TEXT PRIMARY KEY, order_no TEXT NOT NULL, seq INTEGER NOT NULL, amount TEXT NOT NULL,
    file TEXT NOT NULL, payload_hash TEXT NOT NULL, content_hash TEXT NOT NULL,
    claim_id TEXT NOT NULL UNIQUE, processed_at TEXT NOT NULL)`)
  db.exec("CREATE INDEX processed_at ON processed (processed_at)")
  const insert = db.prepare("INSERT OR IGNORE INTO processed VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
  const hash = "0".repeat(64)
  const started = performance.now()
  const cpu = process.cpuUsage()
  for (let b = 0; b < rows / 1000; b++) {
    db.exec("BEGIN")
    for (let i = 0; i < 1000; i++) {
      const id = crypto.randomUUID()
      insert.run(
        id,
        `o${i % 50}`,
        i + 1,
        "1.00",
        `${id}.json`,
        hash,
        hash,
        crypto.randomUUID(),
        new Date().toISOString(),
      )
    }
    db.exec("COMMIT")
  }
  const used = process.cpuUsage(cpu)
  const seconds = (performance.now() - started) / 1000
  db.close()
  for (const suffix of ["", "-wal", "-shm"]) fs.rmSync(path + suffix, { force: true })
  return { seconds, user: used.user / 1e6, system: used.system / 1e6 }
}
