// The repository's commands run as real processes.
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot } from "./repo.ts"

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

/** Starts `consume` with `args`, stdout and stderr piped, for a test that signals or reads it while it runs. */
export function spawnConsume(args: readonly string[], env: Record<string, string> = {}) {
  return Bun.spawn(["bun", join(repoRoot, "packages/consumer/bin/consume.ts"), ...args], {
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdout: "pipe",
    stderr: "pipe",
  })
}

/** Runs one of the consumer package's commands (consume, setup, schema, order-check) directly with bun. */
export function spool(
  command: "consume" | "setup" | "schema" | "order-check" | "compact",
  args: readonly string[],
  env?: Record<string, string>,
) {
  return run(["bun", join(repoRoot, "packages/consumer/bin", `${command}.ts`), ...args], env ? { env } : {})
}

/** Runs `fn` (a command's main() called in-process) with process.stdout and process.stderr captured instead of printed. */
export async function captured(fn: () => Promise<number>): Promise<{ stdout: string; stderr: string; code: number }> {
  const out: string[] = []
  const err: string[] = []
  const realOut = process.stdout.write
  const realErr = process.stderr.write
  const sink = (into: string[]) =>
    ((chunk: string | Uint8Array) => {
      into.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString())
      return true
    }) as typeof process.stdout.write
  process.stdout.write = sink(out)
  process.stderr.write = sink(err)
  try {
    const code = await fn()
    return { stdout: out.join(""), stderr: err.join(""), code }
  } finally {
    process.stdout.write = realOut
    process.stderr.write = realErr
  }
}

/** The ids of the live processes whose parent is `pid`, read from /proc as `pgrep -P` does. */
export function childPids(pid: number): number[] {
  const children: number[] = []
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    let stat: string
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
    } catch {
      continue // exited since the listing
    }
    // The command name in parentheses may hold spaces; the parent id is the second field after it.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
    if (ppid === pid) children.push(Number(entry))
  }
  return children.sort((a, b) => a - b)
}

/** True once the process is stopped (state T in /proc/PID/stat): a SIGSTOP fault step reached. */
export function isStopped(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.charAt(stat.lastIndexOf(")") + 2) === "T"
  } catch {
    return false
  }
}
