// The real consume process as the random-kill tests drive it: started, run to its end, timed.

import fs from "node:fs"
import { join } from "node:path"
import { repoRoot } from "./repo.ts"

export const consumeBin = join(repoRoot, "packages/consumer/bin/consume.ts")

/** A consume process started with Bun.spawn, its stderr collected. */
export interface Consumer {
  readonly proc: Bun.Subprocess<"ignore", "ignore", "pipe">
  /** Resolves when the process has exited and its stderr has been read to the end. */
  readonly finished: Promise<{ exitCode: number | null; signalCode: string | null; stderr: string }>
}

/**
 * Starts `bin` (default: the consume command; or an application run the same way, `bin --root
 * ROOT ARGS...`) on `root`.
 */
export function startConsume(
  root: string,
  args: readonly string[] = [],
  env: Record<string, string> = {},
  bin = consumeBin,
): Consumer {
  const proc = Bun.spawn(["bun", bin, "--root", root, ...args], {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdin: "ignore",
    stdout: "ignore",
    stderr: "pipe",
  })
  const finished = (async () => {
    const stderr = await new Response(proc.stderr).text()
    await proc.exited
    const signalCode = proc.signalCode === null ? null : String(proc.signalCode)
    return { exitCode: proc.exitCode, signalCode, stderr }
  })()
  return { proc, finished }
}

/** Runs consume to its end and returns what it said; throws unless it exited 0. */
export async function consumeToEnd(root: string, args: readonly string[] = [], env: Record<string, string> = {}) {
  const r = await startConsume(root, args, env).finished
  if (r.exitCode !== 0)
    throw new Error(`consume --root ${root} ${args.join(" ")} exited ${r.exitCode ?? r.signalCode}:\n${r.stderr}`)
  return r
}

/**
 * Runs consume to its end (it must exit 0) and measures it: start-up (until the run first
 * changes the queue, polled every 10 ms) and the time it then worked. Random kills are
 * scaled by the latter, so that they land all over a run on a fast machine and a slow one.
 */
export async function timeConsume(root: string, args: readonly string[] = [], bin = consumeBin) {
  const before = mtimes(root)
  const spawnedAt = performance.now()
  const c = startConsume(root, args, {}, bin)
  let hasExited = false
  void c.finished.then(() => {
    hasExited = true
  })
  let activeAt: number | undefined
  while (!hasExited && activeAt === undefined) {
    await Bun.sleep(10)
    if (mtimes(root) !== before) activeAt = performance.now()
  }
  const r = await c.finished
  if (r.exitCode !== 0) throw new Error(`consume --root ${root} exited ${r.exitCode ?? r.signalCode}:\n${r.stderr}`)
  const end = performance.now()
  return { startupMs: (activeAt ?? end) - spawnedAt, activeMs: end - (activeAt ?? end) }
}

/** Runs consume on `root` again and again until a run exits 0 (each other run must end by SIGKILL). */
export async function consumeUntilDone(
  root: string,
  args: readonly string[],
  env: Record<string, string>,
  bin = consumeBin,
) {
  for (let i = 0; i < 20; i++) {
    const r = await startConsume(root, args, env, bin).finished
    if (r.exitCode === 0) return
    if (r.signalCode !== "SIGKILL") throw new Error(`consume exited ${r.exitCode}:\n${r.stderr}`)
  }
  throw new Error(`consume --root ${root} never finished under ${JSON.stringify(env)}`)
}

export const mtimes = (root: string) =>
  `${fs.statSync(join(root, "inbox")).mtimeMs}/${fs.statSync(join(root, "processing")).mtimeMs}`
