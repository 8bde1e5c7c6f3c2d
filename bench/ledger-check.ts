// What the ledger's integrity checks cost: PRAGMA quick_check (consume runs it when the last
// run did not close the ledger cleanly), PRAGMA integrity_check and sql/sqlite/verify.sql
// (both `bun run verify`), on a ledger with ROWS processed rows shaped as consume writes them,
// built with the real schema; or on an existing ledger with --ledger PATH. Each check runs on
// a fresh connection with the ledger's 8 MiB cache, so the figures are SQLite's work over
// pages in the OS page cache (the file was just written or read); from a cold disk the same
// checks take many times longer (drop the caches first: sync; echo 3 > /proc/sys/vm/drop_caches).
//
// Usage: bun bench/ledger-check.ts [ROWS=1000000] [ROUNDS=3] [--ledger PATH]
import { Database } from "bun:sqlite"
import { spawnSync } from "node:child_process"
import fs from "node:fs"
import os from "node:os"
import { join, resolve } from "node:path"
import { parseArgs } from "node:util"
import { rng } from "@spool/test-support"

const repo = resolve(import.meta.dir, "..")
const verifySql = fs.readFileSync(join(repo, "packages/core/sql/sqlite/verify.sql"), "utf8")

const { values, positionals } = parseArgs({ options: { ledger: { type: "string" } }, allowPositionals: true })
const rows = Number(positionals[0] ?? 1_000_000)
const rounds = Number(positionals[1] ?? 3)
if (!(rows >= 1) || !(rounds >= 1)) {
  process.stderr.write("usage: bun bench/ledger-check.ts [ROWS>=1] [ROUNDS>=1] [--ledger PATH]\n")
  process.exit(2)
}

const dir = values.ledger === undefined ? fs.mkdtempSync(join(os.tmpdir(), "spool-ledger-check-")) : undefined
try {
  const path = values.ledger ?? build(dir as string, rows)
  const checks = {
    quick_check: "PRAGMA quick_check",
    integrity_check: "PRAGMA integrity_check",
    "verify.sql": verifySql,
  }
  console.log(`${path}: ${count(path)} processed rows, ${(fs.statSync(path).size / 2 ** 20).toFixed(0)} MiB`)
  for (let round = 1; round <= rounds; round++) {
    const line = Object.entries(checks).map(([name, sql]) => `${name} ${time(path, sql).toFixed(0)} ms`)
    console.log(`round ${round}: ${line.join(", ")}`)
  }
} finally {
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
}

function time(path: string, sql: string): number {
  const db = new Database(path, { readonly: true })
  try {
    db.exec("PRAGMA cache_size = -8192")
    const started = performance.now()
    db.query(sql).all()
    return performance.now() - started
  } finally {
    db.close()
  }
}

function count(path: string): number {
  const db = new Database(path, { readonly: true })
  try {
    return (db.query("SELECT count(*) AS n FROM processed").get() as { n: number }).n
  } finally {
    db.close()
  }
}

/**
 * A ledger with `n` processed rows: the bench's msg_ids (bench/generated-queue.ts), consume's
 * hashes, file names and claim ids, inserted in a shuffled order as a directory's order
 * shuffles them for consume (in key order the index pages would be packed full, and the
 * checks faster than in use).
 */
function build(dir: string, n: number): string {
  // The real schema: consume creates and migrates the ledger of an empty queue.
  const root = join(dir, "q")
  for (const d of ["inbox", "processing", "done", "error"]) fs.mkdirSync(join(root, d), { recursive: true })
  const consume = spawnSync("bun", [join(repo, "packages/consumer/bin/consume.ts"), "--root", root, "--quiet"])
  if (consume.status !== 0) throw new Error(`consume failed: ${consume.stderr}`)
  const path = join(root, "ledger.db")
  const db = new Database(path)
  db.exec("PRAGMA synchronous = OFF")
  const insert = db.prepare(
    "INSERT INTO processed (msg_id, order_no, seq, amount, file, payload_hash, content_hash, claim_id, processed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
  )
  const hash = (k: number, salt: string) => new Bun.CryptoHasher("sha256").update(`${salt}${k}`).digest("hex")
  const at = new Date().toISOString()
  const order = Array.from({ length: n }, (_, i) => i)
  const random = rng(20261201)
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[order[i], order[j]] = [order[j] as number, order[i] as number]
  }
  for (let k = 0; k < n; k += 10_000) {
    db.transaction(() => {
      for (const i of order.slice(k, k + 10_000)) {
        const id = `m-${i.toString(36).padStart(7, "0")}`
        insert.run(
          id,
          `A-${Math.floor(i / 5)}`,
          (i % 5) + 1,
          "12.34",
          `${crypto.randomUUID()}.json`,
          hash(i, "p"),
          hash(i, "c"),
          `owner-${i}.${i.toString(36)}`,
          at,
        )
      }
    })()
  }
  insert.finalize()
  db.close()
  return path
}
