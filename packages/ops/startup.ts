#!/usr/bin/env bun
// Start-up time of the built lag.sh and replay.sh (each must answer in under 100 ms: cron runs
// them every minute). Runs each command N times, interleaved with a bare `bun` start so that
// machine load weighs on all alike, and prints the median and minimum wall time and the median
// CPU time. Usage: bun startup.ts [N]   (build first: bun run build)
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"

const runs = Number(process.argv[2] ?? 20)
const dist = join(import.meta.dir, "dist")
const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-startup-"))
try {
  const root = join(dir, "q")
  for (const d of ["inbox", "processing", "done", "error"]) fs.mkdirSync(join(root, d), { recursive: true })
  for (let i = 0; i < 100; i++) fs.writeFileSync(join(root, "inbox", `m${i}.json`), "{}")
  fs.writeFileSync(join(dir, "empty.js"), "")
  const commands: [string, string[]][] = [
    ["bun (empty script)", ["bun", join(dir, "empty.js")]],
    ["lag.sh DIR 10", [join(dist, "lag.sh"), root, "10"]],
    ["lag.sh DIR 10 --json", [join(dist, "lag.sh"), root, "10", "--json"]],
    ["replay.sh --help", [join(dist, "replay.sh"), "--help"]],
    ["replay.sh (refused)", [join(dist, "replay.sh"), "--root", root, "absent.json"]],
  ]
  const wall = commands.map((): number[] => [])
  const cpu = commands.map((): number[] => [])
  for (let i = 0; i < runs; i++)
    commands.forEach(([, cmd], j) => {
      const t = Bun.nanoseconds()
      const p = Bun.spawnSync(cmd, { stdout: "ignore", stderr: "ignore" })
      wall[j]?.push((Bun.nanoseconds() - t) / 1e6)
      const u = p.resourceUsage
      if (u) cpu[j]?.push(Number(u.cpuTime.user + u.cpuTime.system) / 1000)
    })
  const median = (a: number[]) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)] ?? Number.NaN
  console.log(`${runs} runs each, load average ${os.loadavg()[0]?.toFixed(2)} on ${os.availableParallelism()} cores`)
  commands.forEach(([name], j) => {
    const w = wall[j] ?? []
    console.log(
      `${name.padEnd(24)} median ${median(w).toFixed(1)} ms  min ${Math.min(...w).toFixed(1)} ms  cpu median ${median(cpu[j] ?? []).toFixed(1)} ms`,
    )
  })
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
