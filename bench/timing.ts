// Contenders run as separate processes, timed from outside: wall time, peak RSS and CPU time.
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { type CpuSplit, sampleCpu } from "./cpu-split.ts"
import { repo } from "./shell.ts"

// GNU time reports the peak RSS after exit; without it, /proc is polled while the process runs.
const hasTime = fs.existsSync("/usr/bin/time")

/**
 * Runs the processes at once; wall time until the last exits, peak RSS of the largest, CPU time
 * (user + system) of all, and where that CPU went (cpu-split.ts; with `server`, the PostgreSQL
 * server's too).
 */
export async function timed(
  cmds: string[][],
  server = false,
): Promise<{ seconds: number; peakRssMb: number; cpuSeconds: number; cpuSplit?: CpuSplit; stdout: string[] }> {
  const timeFiles = cmds.map((_, i) => join(os.tmpdir(), `spool-bench-time-${process.pid}-${i}`))
  const started = performance.now()
  const procs = cmds.map((cmd, i) =>
    Bun.spawn(hasTime ? ["/usr/bin/time", "-f", "%M %U %S", "-o", timeFiles[i] as string, ...cmd] : cmd, {
      cwd: repo,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "inherit",
    }),
  )
  const sampler = sampleCpu(
    procs.map((p) => p.pid),
    server,
  )
  const hwm = procs.map(() => 0)
  const poll = hasTime
    ? undefined
    : setInterval(() => {
        for (const [i, p] of procs.entries()) {
          try {
            const m = /VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${p.pid}/status`, "utf8"))
            if (m) hwm[i] = Math.max(hwm[i] ?? 0, Number(m[1]))
          } catch {}
        }
      }, 5)
  const stdout = await Promise.all(procs.map((p) => new Response(p.stdout).text()))
  const codes = await Promise.all(procs.map((p) => p.exited))
  const seconds = (performance.now() - started) / 1000
  const cpuSplit = sampler?.stop()
  if (poll) clearInterval(poll)
  for (const [i, code] of codes.entries()) if (code !== 0) throw new Error(`${cmds[i]?.join(" ")} exited with ${code}`)
  // GNU time's last line: peak RSS in KB, user and system seconds.
  const lines = hasTime
    ? timeFiles.map((f) => (fs.readFileSync(f, "utf8").trim().split("\n").pop() ?? "").split(" "))
    : []
  const kb = hasTime ? lines.map((l) => Number(l[0])) : hwm
  const cpuSeconds = hasTime
    ? lines.reduce((sum, l) => sum + Number(l[1]) + Number(l[2]), 0)
    : procs.reduce((sum, p) => sum + Number(p.resourceUsage()?.cpuTime.total ?? 0) / 1e6, 0)
  for (const f of timeFiles) fs.rmSync(f, { force: true })
  return { seconds, peakRssMb: Math.max(...kb) / 1024, cpuSeconds, ...(cpuSplit && { cpuSplit }), stdout }
}
