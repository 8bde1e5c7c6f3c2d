// `bun bench/pg-statements.ts [--messages N] [--consumers K] [--log FILE] [--top T] [--explain MS]`
//
// What the PostgreSQL server itself spends on a consume run, statement by statement, where
// pg_stat_statements cannot be loaded (it needs shared_preload_libraries, a server-wide
// setting): a fresh database whose own settings make its sessions log the resources of every
// statement (log_statement_stats: the backend's user and system CPU, and the elapsed time, of
// each parse, bind and execute), one consume run (K processes on one root) on the bench's
// queue, then the server log's lines for that database summed per statement text. CPU time is
// what the server spent whatever else the machine runs; elapsed time includes its waits (the
// WAL flush of COMMIT, locks, a busy machine's run queue). With --explain MS, auto_explain also
// logs the plan (ANALYZE, BUFFERS) of every statement slower than MS, and they are printed.
// Needs the server log readable (--log, default the Debian cluster's) and a superuser (the
// settings are a superuser's).
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { tempDatabase } from "@spool/test-support"
import { SQL } from "bun"
import { fmt } from "./figures.ts"
import { freshRoot, generate } from "./generated-queue.ts"
import { timed } from "./timing.ts"

const { values: v } = parseArgs({
  args: process.argv.slice(2),
  options: {
    messages: { type: "string" },
    consumers: { type: "string" },
    log: { type: "string" },
    top: { type: "string" },
    explain: { type: "string" },
  },
  strict: true,
})
const N = Number(v.messages ?? 20_000)
const K = Number(v.consumers ?? 1)
const top = Number(v.top ?? 15)
const logFile = v.log ?? defaultLog()

function defaultLog(): string {
  const dir = "/var/log/postgresql"
  const logs = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => /^postgresql-.*\.log$/.test(f)) : []
  if (logs.length !== 1) throw new Error(`name the server's log with --log (found in ${dir}: ${logs.join(", ")})`)
  return join(dir, logs[0] as string)
}

const base = fs.mkdtempSync(join(os.tmpdir(), "spool-pgstat-"))
try {
  const master = join(base, "master-inbox")
  fs.mkdirSync(master)
  generate(master, N)
  const root = freshRoot(base, "run", master)
  await using pg = await tempDatabase()
  const db = new URL(pg.url).pathname.slice(1)
  const admin = new SQL({ url: pg.url, max: 1 })
  await admin.unsafe(`ALTER DATABASE ${db} SET log_statement_stats = on`)
  if (v.explain !== undefined)
    for (const setting of [
      "session_preload_libraries = 'auto_explain'",
      `auto_explain.log_min_duration = ${Number(v.explain)}`,
      "auto_explain.log_analyze = on",
      "auto_explain.log_buffers = on",
      "auto_explain.log_timing = on",
      "log_parameter_max_length = 0",
    ])
      await admin.unsafe(`ALTER DATABASE ${db} SET ${setting}`)
  await admin.close()
  const from = fs.statSync(logFile).size
  // Each consume process under GNU time, for its own CPU time (user and system).
  const cpuFiles = Array.from({ length: K }, (_, i) => join(base, `cpu-${i}`))
  const t = await timed(
    cpuFiles.map((f) => [
      "/usr/bin/time",
      "-f",
      "%U %S",
      "-o",
      f,
      "bun",
      "packages/consumer/bin/consume.ts",
      "--root",
      root,
      "--ledger",
      pg.url,
      "--quiet",
    ]),
  )
  const clientCpuMs = cpuFiles.reduce((sum, f) => {
    const [user = 0, system = 0] = fs.readFileSync(f, "utf8").trim().split("\n").pop()?.split(" ").map(Number) ?? []
    return sum + 1000 * (user + system)
  }, 0)
  // The server writes its log lines as the statements end; the last ones may lag the exit.
  await Bun.sleep(500)
  const text = readFrom(logFile, from)
  const rows = summarize(text, db)
  const cpu = rows.reduce((s, r) => s + r.cpuMs, 0)
  const elapsed = rows.reduce((s, r) => s + r.elapsedMs, 0)
  const out = [
    `${N} messages, ${K} consume process(es), ${fmt(t.seconds, 2)} s wall; load ${fmt(os.loadavg()[0] ?? 0, 2)} at end`,
    `server: ${fmt(cpu, 0)} ms CPU, ${fmt(elapsed, 0)} ms elapsed, over ${rows.reduce((s, r) => s + r.calls, 0)} statements; consume process(es): ${fmt(clientCpuMs, 0)} ms CPU`,
    "",
    "| statement | calls | CPU ms | CPU ms/call | elapsed ms | share of CPU |",
    "|---|---:|---:|---:|---:|---:|",
    ...rows
      .slice(0, top)
      .map(
        (r) =>
          `| \`${r.text.slice(0, 100).replaceAll("|", "\\|")}\` | ${r.calls} | ${fmt(r.cpuMs, 0)} | ${fmt(r.cpuMs / r.calls, 2)} | ${fmt(r.elapsedMs, 0)} | ${fmt((100 * r.cpuMs) / cpu, 0)}% |`,
      ),
  ]
  if (v.explain !== undefined) out.push("", ...plans(text, db))
  process.stdout.write(`${out.join("\n")}\n`)
} finally {
  fs.rmSync(base, { recursive: true, force: true })
}

function readFrom(file: string, offset: number): string {
  const fd = fs.openSync(file, "r")
  try {
    const size = fs.fstatSync(fd).size
    const buf = Buffer.alloc(size - offset)
    fs.readSync(fd, buf, 0, buf.length, offset)
    return buf.toString("utf8")
  } finally {
    fs.closeSync(fd)
  }
}

/** The plans auto_explain logged for database `db`, the first of each statement text. */
function plans(text: string, db: string): string[] {
  const seen = new Set<string>()
  const out: string[] = []
  for (const entry of text.split(/\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)/)) {
    if (!entry.includes(`@${db} LOG:  duration:`) || !entry.includes("Query Text:")) continue
    const query = (/Query Text:([\s\S]*)/.exec(entry)?.[1] ?? "").replace(/\s+/g, " ").trim().slice(0, 80)
    if (seen.has(query)) continue
    seen.add(query)
    out.push(entry)
  }
  return out
}

interface Row {
  text: string
  calls: number
  cpuMs: number
  elapsedMs: number
}

/**
 * The statistics lines of database `db` summed per statement text: each is a LOG line, a DETAIL
 * line with the usage and a STATEMENT line with the text, from one backend (the pid).
 */
function summarize(text: string, db: string): Row[] {
  const byText = new Map<string, Row>()
  const usage = new Map<string, { cpuMs: number; elapsedMs: number; isExecute: boolean }>()
  const kind = new Map<string, string>()
  const prefix = new RegExp(`^\\S+ \\S+ \\S+ \\[(\\d+)\\] \\S+@${db} (LOG|DETAIL|STATEMENT):  ([\\s\\S]*)$`)
  for (const entry of text.split(/\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)/)) {
    const m = prefix.exec(entry)
    if (m === null) continue
    const [, pid = "", level, body = ""] = m
    if (level === "LOG") kind.set(pid, body)
    else if (level === "DETAIL") {
      const u = /([0-9.]+) s user, ([0-9.]+) s system, ([0-9.]+) s elapsed/.exec(body)
      if (u === null) continue
      const what = kind.get(pid) ?? ""
      usage.set(pid, {
        cpuMs: 1000 * (Number(u[1]) + Number(u[2])),
        elapsedMs: 1000 * Number(u[3]),
        isExecute: !what.startsWith("PARSE") && !what.startsWith("BIND"),
      })
    } else {
      const u = usage.get(pid)
      if (u === undefined) continue
      usage.delete(pid)
      const stmt = body.replace(/\s+/g, " ").trim()
      const row = byText.get(stmt) ?? { text: stmt, calls: 0, cpuMs: 0, elapsedMs: 0 }
      row.cpuMs += u.cpuMs
      row.elapsedMs += u.elapsedMs
      // One execute (or simple query) per call; its parse and bind add their time only.
      if (u.isExecute) row.calls++
      byText.set(stmt, row)
    }
  }
  return [...byText.values()].sort((a, b) => b.cpuMs - a.cpuMs)
}
