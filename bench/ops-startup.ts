// Start-up time of the ops commands: cron runs them, so their start-up is most of their cost.
import { spawnSync } from "node:child_process"
import fs from "node:fs"
import { join } from "node:path"
import { median } from "./figures.ts"
import { repo } from "./shell.ts"

/** Start-up of the cron-run ops commands: median wall time of 11 runs, in ms (undefined if not built). */
export function measureStartup(base: string): { lagMs: number; replayMs: number } | undefined {
  const dist = join(repo, "packages/ops/dist")
  if (!fs.existsSync(join(dist, "lag.sh")) || !fs.existsSync(join(dist, "replay.sh"))) {
    process.stderr.write("bench: packages/ops/dist not built (bun run build); skipping lag.sh/replay.sh start-up\n")
    return undefined
  }
  const root = join(base, "startup")
  for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
  const time = (cmd: string[], wantCode: number): number => {
    const xs: number[] = []
    for (let i = 0; i < 11; i++) {
      const t = performance.now()
      const r = spawnSync(cmd[0] as string, cmd.slice(1), { env: { ...process.env, SPOOL_ROOT: root } })
      xs.push(performance.now() - t)
      if (r.status !== wantCode) throw new Error(`${cmd.join(" ")} exited ${r.status}: ${r.stderr}`)
    }
    return median(xs)
  }
  // lag on an empty queue answers 0; replay of a file not in error/ refuses (1) after the same start-up.
  return {
    lagMs: time([join(dist, "lag.sh"), root, "0"], 0),
    replayMs: time([join(dist, "replay.sh"), "absent.json"], 1),
  }
}
