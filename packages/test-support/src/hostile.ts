// Helpers for the hostile-input, fault, property and permission tests.
import { Database } from "bun:sqlite"
import fs from "node:fs"
import { join } from "node:path"
import { SQL } from "bun"
import { list } from "./end-state.ts"
import { pgUnavailable, tempDatabase } from "./postgres.ts"
import { repoRoot } from "./repo.ts"

/** What a bounded consume run did; `signal` is set when the bound killed it (a hang). */
export interface BoundedRun {
  readonly stdout: string
  readonly stderr: string
  readonly exitCode: number | null
  readonly signal: string | null
}

/**
 * Runs the real consume process on `root`, killed after `timeoutMs`: a hang (a FIFO opened,
 * a loop that never ends) shows up as `signal: "SIGKILL"` instead of a stuck test.
 */
export async function consumeBounded(
  root: string,
  args: readonly string[] = [],
  options: { timeoutMs?: number; env?: Record<string, string> } = {},
): Promise<BoundedRun> {
  const proc = Bun.spawn(["bun", join(repoRoot, "packages/consumer/bin/consume.ts"), "--root", root, ...args], {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: "1", ...options.env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    timeout: options.timeoutMs ?? 30_000,
    killSignal: "SIGKILL",
  })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ])
  const signal = proc.signalCode === null ? null : String(proc.signalCode)
  return { stdout, stderr, exitCode: signal === null ? exitCode : null, signal }
}

/** Parses RFC 4180 CSV strictly: throws on a stray quote or an unterminated quoted field. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let i = 0
  while (i < text.length) {
    let field = ""
    if (text[i] === '"') {
      i++
      for (;;) {
        if (i >= text.length) throw new Error("unterminated quoted field")
        if (text[i] === '"') {
          if (text[i + 1] === '"') {
            field += '"'
            i += 2
            continue
          }
          i++
          break
        }
        field += text[i++]
      }
    } else {
      while (i < text.length && !",\r\n".includes(text[i] as string)) {
        if (text[i] === '"') throw new Error(`stray quote in an unquoted field at offset ${i}`)
        field += text[i++]
      }
    }
    row.push(field)
    if (text[i] === ",") {
      i++
      continue
    }
    if (text[i] === "\r") i++
    if (i < text.length && text[i] !== "\n") throw new Error(`text after a quoted field at offset ${i}`)
    i++
    rows.push(row)
    row = []
  }
  return rows
}

/** error.csv parsed, header checked: a map from file name to reason. */
export function readErrorCsv(root: string): Map<string, string> {
  const rows = parseCsv(fs.readFileSync(join(root, "error.csv"), "utf8"))
  const [header, ...body] = rows
  if (header?.join(",") !== "file,reason") throw new Error(`bad error.csv header: ${JSON.stringify(header)}`)
  const out = new Map<string, string>()
  for (const r of body) {
    if (r.length !== 2) throw new Error(`error.csv row with ${r.length} fields: ${JSON.stringify(r)}`)
    out.set(r[0] as string, r[1] as string)
  }
  if (out.size !== body.length) throw new Error("error.csv lists a file twice")
  return out
}

interface FailureRow {
  file: string
  original: string
  reason: string
  detail: string
}

interface ProcessedRow {
  msg_id: string
  order_no: string
  seq: number
  amount: string
  file: string
}

/** Ledger rows the hostile tests look at. */
export interface LedgerRows {
  /** Unreplayed failures, by file name in error/. */
  readonly failures: Map<string, FailureRow>
  /** Processed rows, by msg_id. */
  readonly processed: Map<string, ProcessedRow>
  readonly claims: number
}

/** The rows of ROOT/ledger.db the hostile tests look at. */
export function ledgerRows(root: string): LedgerRows {
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    const failures = db
      .query("SELECT file, original, reason, detail FROM failures WHERE replayed_at IS NULL")
      .all() as FailureRow[]
    const processed = db.query("SELECT msg_id, order_no, seq, amount, file FROM processed").all() as ProcessedRow[]
    return {
      failures: new Map(failures.map((r) => [r.file, r])),
      processed: new Map(processed.map((r) => [r.msg_id, r])),
      claims: (db.query("SELECT count(*) AS n FROM claims").get() as { n: number }).n,
    }
  } finally {
    db.close()
  }
}

export type LedgerKind = "SQLite" | "PostgreSQL"

/** The ledgers a corpus runs on: SQLite, and PostgreSQL when a server answers (a warning says why not). */
export async function availableLedgers(): Promise<LedgerKind[]> {
  const skip = await pgUnavailable()
  if (skip) console.warn(skip)
  return skip ? ["SQLite"] : ["SQLite", "PostgreSQL"]
}

/** One queue's ledger in a test: ROOT/ledger.db, or a fresh PostgreSQL database dropped when disposed. */
export interface TestLedger extends AsyncDisposable {
  readonly kind: LedgerKind
  /** consume's arguments that select this ledger. */
  readonly args: readonly string[]
  /** The rows the hostile tests look at, as this ledger holds them for `root`. */
  rows(root: string): Promise<LedgerRows>
}

/** A fresh ledger of `kind` for one queue. */
export async function testLedger(kind: LedgerKind): Promise<TestLedger> {
  if (kind === "SQLite")
    return { kind, args: [], rows: async (root) => ledgerRows(root), async [Symbol.asyncDispose]() {} }
  const db = await tempDatabase()
  return {
    kind,
    args: ["--ledger", db.url],
    async rows() {
      // One database per test, so one root: no root_id filter needed.
      const sql = new SQL({ url: db.url, max: 1 })
      try {
        const failures = (await sql`
          SELECT file, original, reason, detail FROM failures WHERE replayed_at IS NULL`) as FailureRow[]
        const processed = (await sql`
          SELECT msg_id, order_no, seq::text AS seq, amount, file FROM processed`) as (Omit<ProcessedRow, "seq"> & {
          seq: string
        })[]
        const [claims] = await sql`SELECT count(*)::int AS n FROM claims`
        return {
          failures: new Map(failures.map((r) => [r.file, { ...r }])),
          processed: new Map(processed.map((r) => [r.msg_id, { ...r, seq: Number(r.seq) }])),
          claims: claims.n as number,
        }
      } finally {
        await sql.close()
      }
    },
    [Symbol.asyncDispose]: () => db[Symbol.asyncDispose](),
  }
}

/**
 * Everything a corpus must end with alike on either ledger: each directory's entries (a file
 * by the sha256 of its bytes, anything else by its kind), the reports, and the ledger's rows
 * sorted by code unit.
 */
export async function corpusEndState(root: string, ledger: TestLedger) {
  // By the names' bytes: a name that is not UTF-8 (left in inbox/ when hidden) has no string to open.
  const entries = (d: string) =>
    Object.fromEntries(
      fs
        .readdirSync(join(root, d), { encoding: "buffer" })
        .sort(Buffer.compare)
        .map((n) => {
          const p = Buffer.concat([Buffer.from(`${join(root, d)}/`), n])
          const st = fs.lstatSync(p)
          // Not a symlink's target: each run's queue is in a directory of its own. Not the bytes
          // of a file too large to consume: reading them takes long, and sets its atime.
          const kind = st.isFile()
            ? st.size > 1024 * 1024
              ? `${st.size} bytes`
              : new Bun.CryptoHasher("sha256").update(fs.readFileSync(p)).digest("hex")
            : st.isSymbolicLink()
              ? "symlink"
              : st.isDirectory()
                ? "directory"
                : "other"
          const name = n.toString()
          return [Buffer.from(name).equals(n) ? name : `0x${n.toString("hex")}`, kind]
        }),
    )
  const report = (f: string) => (fs.existsSync(join(root, f)) ? fs.readFileSync(join(root, f), "utf8") : undefined)
  const rows = await ledger.rows(root)
  const byKey = <T>(m: Map<string, T>) => [...m].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r)
  return {
    inbox: entries("inbox"),
    processing: entries("processing"),
    done: entries("done"),
    error: entries("error"),
    errorCsv: report("error.csv"),
    dupTxt: report("dup.txt"),
    conflictsCsv: report("conflicts.csv"),
    failures: byKey(rows.failures),
    processed: byKey(rows.processed),
    claims: rows.claims,
  }
}

/** Every entry of each queue directory. */
export function queueListing(root: string) {
  return {
    inbox: list(join(root, "inbox")),
    processing: list(join(root, "processing")),
    done: list(join(root, "done")),
    error: list(join(root, "error")),
  }
}
