import { fileURLToPath } from "node:url"
import { stopSignals } from "@spool/cli"
import { ExitCode, type Log } from "@spool/core/engine"

const consumeBin = fileURLToPath(new URL("../bin/consume.ts", import.meta.url))

/**
 * Runs `n` consume processes on the same root, with the same flags minus --concurrency, and
 * waits for all of them. Processes rather than threads: each gets its own core and its own
 * ledger connection, and the ledger's claim transaction already keeps two consumers off one
 * file. SIGINT/SIGTERM/SIGHUP are passed on; the exit code is the worst child's (3 if one was killed).
 * A child that one of those ended before it could handle it (it was still starting) was not
 * killed: it touched nothing. Watching, a worker that ends before any stop (killed, a failure)
 * is reported at once and the others are stopped, so that the run ends with its exit code and
 * a supervisor restarts the whole pool, instead of going on short of a worker unseen.
 */
export async function runWorkers(
  n: number,
  argv: readonly string[],
  log: Log,
  isWatching = false,
): Promise<{ readonly code: number; readonly isAnyKilled: boolean }> {
  const childArgv = [...withoutOption(argv, "--concurrency"), "--no-progress"]
  log.info("workers", { count: n })
  const children = Array.from({ length: n }, (_, i) =>
    Bun.spawn([process.execPath, consumeBin, ...childArgv], {
      stdio: ["ignore", "inherit", "inherit"],
      env: { ...process.env, SPOOL_WORKER: String(i + 1) },
    }),
  )
  const forwarded = new Set<string>()
  const forward = (signal: NodeJS.Signals) => {
    forwarded.add(signal)
    for (const c of children) if (c.exitCode === null) c.kill(signal)
  }
  for (const s of stopSignals) process.on(s, forward)
  const reported = new Set<number>()
  const report = (i: number, c: (typeof children)[number]) => {
    reported.add(i)
    log.warn("worker-failed", { worker: i + 1, pid: c.pid, exit_code: c.exitCode, signal: c.signalCode })
  }
  if (isWatching)
    for (const [i, c] of children.entries())
      void c.exited.then(async () => {
        // A stop sent to the whole process group (systemd, Ctrl-C) reaches a worker too, maybe
        // before this process's own handler has run: give that handler a moment to say so.
        await Bun.sleep(stopGraceMs)
        if (forwarded.size > 0) return
        report(i, c)
        forward("SIGTERM")
      })
  try {
    await Promise.all(children.map((c) => c.exited))
  } finally {
    for (const s of stopSignals) process.off(s, forward)
  }
  let worst: number = ExitCode.ok
  const isStopped = (c: (typeof children)[number]) => typeof c.signalCode === "string" && forwarded.has(c.signalCode)
  const isAnyKilled = children.some((c) => c.signalCode !== null && !isStopped(c))
  for (const [i, c] of children.entries()) {
    // A watching worker that ended on its own, whatever its code, left the pool short: a failure.
    const isLost = reported.has(i)
    const code = c.exitCode ?? (isStopped(c) && !isLost ? ExitCode.ok : ExitCode.failure)
    if (code !== ExitCode.ok && !isLost) report(i, c)
    worst = Math.max(worst, isLost && code === ExitCode.ok ? ExitCode.failure : code)
  }
  return { code: worst, isAnyKilled }
}

/** How long a watching worker's exit waits for a stop signal the parent may not have handled yet. */
const stopGraceMs = 500

/** argv without `--name VALUE` / `--name=VALUE`. */
export function withoutOption(argv: readonly string[], name: string): string[] {
  const out: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string
    if (a === "--") {
      out.push(...argv.slice(i))
      break
    }
    if (a === name) i++
    else if (!a.startsWith(`${name}=`)) out.push(a)
  }
  return out
}
