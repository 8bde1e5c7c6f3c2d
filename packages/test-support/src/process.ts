// The repository's commands run as real processes.
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

/** Runs one of the consumer package's commands (consume, setup, schema, order-check) directly with bun. */
export function spool(
  command: "consume" | "setup" | "schema" | "order-check",
  args: readonly string[],
  env?: Record<string, string>,
) {
  return run(["bun", join(repoRoot, "packages/consumer/bin", `${command}.ts`), ...args], env ? { env } : {})
}
