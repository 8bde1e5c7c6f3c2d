// Shared fixtures for end-to-end tests: disposable queues, real processes, state snapshots.
import { Database } from "bun:sqlite"
import fs from "node:fs"
import os from "node:os"
import { join, resolve } from "node:path"
import { SQL } from "bun"

export const repoRoot = resolve(import.meta.dir, "../../..")
export const fixturesDir = join(repoRoot, "fixtures")

/** A temporary directory removed when disposed (`await using q = await tempDir()`). */
export interface TempDir extends AsyncDisposable {
  readonly path: string
}

export async function tempDir(prefix = "spool-test-"): Promise<TempDir> {
  const path = fs.mkdtempSync(join(os.tmpdir(), prefix))
  return {
    path,
    async [Symbol.asyncDispose]() {
      fs.rmSync(path, { recursive: true, force: true })
    },
  }
}

/** A temporary queue root with the four directories (and tmp/), optionally seeded. */
export interface TempQueue extends TempDir {
  readonly root: string
  /** Writes a file into inbox/ (raw bytes or a JSON value). */
  put(name: string, content: string | Uint8Array | object): void
}

export async function tempQueue(
  options: { seed?: "fixtures" | Record<string, string | object> } = {},
): Promise<TempQueue> {
  const dir = await tempDir()
  const root = join(dir.path, "q")
  for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
  const put = (name: string, content: string | Uint8Array | object) => {
    const data = typeof content === "string" || content instanceof Uint8Array ? content : JSON.stringify(content)
    fs.writeFileSync(join(root, "inbox", name), data)
  }
  if (options.seed === "fixtures") {
    for (const e of fs.readdirSync(fixturesDir, { withFileTypes: true }))
      if (e.isFile() && e.name.endsWith(".json"))
        fs.copyFileSync(join(fixturesDir, e.name), join(root, "inbox", e.name))
  } else if (options.seed) {
    for (const [name, content] of Object.entries(options.seed)) put(name, content)
  }
  return { path: dir.path, root, put, [Symbol.asyncDispose]: dir[Symbol.asyncDispose] }
}

/** What a finished process printed and returned. */
export interface RunResult {
  readonly stdout: string
  readonly stderr: string
  readonly exitCode: number
}

/** Runs a command as a real process from the repo root (e.g. `["bun", "run", "consume", "--root", q]`). */
export async function run(
  cmd: readonly string[],
  options: { env?: Record<string, string>; cwd?: string; stdin?: string } = {},
): Promise<RunResult> {
  const proc = Bun.spawn([...cmd], {
    cwd: options.cwd ?? repoRoot,
    env: { ...process.env, NO_COLOR: "1", ...options.env },
    stdin: options.stdin === undefined ? "ignore" : Buffer.from(options.stdin),
    stdout: "pipe",
    stderr: "pipe",
  })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ])
  return { stdout, stderr, exitCode }
}

/** Runs one of the consumer package's commands (consume, setup, schema, order-check) directly with bun. */
export function spool(
  command: "consume" | "setup" | "schema" | "order-check",
  args: readonly string[],
  env?: Record<string, string>,
) {
  return run(["bun", join(repoRoot, "packages/consumer/bin", `${command}.ts`), ...args], env ? { env } : {})
}

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

/**
 * `snapshot` for either backend: the ledger rows from PostgreSQL when `ledgerUrl` is given (a
 * database that holds this one root), with the same columns and types as the SQLite snapshot.
 */
export async function endState(root: string, ledgerUrl?: string): Promise<ReturnType<typeof snapshot>> {
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
