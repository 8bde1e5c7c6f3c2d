// Helpers for the hostile-input, fault, property and permission tests.
import { Database } from "bun:sqlite"
import fs from "node:fs"
import { join } from "node:path"
import { list, repoRoot } from "./support.ts"

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

/** Ledger rows the hostile tests look at. */
export function ledgerRows(root: string) {
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    return {
      failures: new Map(
        (
          db.query("SELECT file, reason, detail FROM failures WHERE replayed_at IS NULL").all() as {
            file: string
            reason: string
            detail: string
          }[]
        ).map((r) => [r.file, r]),
      ),
      processed: new Map(
        (
          db.query("SELECT msg_id, order_no, seq, amount, file FROM processed").all() as {
            msg_id: string
            order_no: string
            seq: number
            amount: string
            file: string
          }[]
        ).map((r) => [r.msg_id, r]),
      ),
      claims: (db.query("SELECT count(*) AS n FROM claims").get() as { n: number }).n,
    }
  } finally {
    db.close()
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
