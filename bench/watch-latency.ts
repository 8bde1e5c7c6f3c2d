// Watch-mode latency: how long a file waits between its arrival in inbox/ and done/.
import fs from "node:fs"
import { join } from "node:path"
import { countEntries, expectDone } from "./end-state.ts"
import { percentile } from "./figures.ts"
import { message } from "./generated-queue.ts"
import { repo } from "./shell.ts"

/**
 * Watch-mode latency: `consume --watch` (durable, defaults) runs while this process puts
 * `rate` messages per second into inbox/ for `seconds`, the Maildir way (tmp/, then rename).
 * A file's latency is from its rename into inbox/ to its rename into done/ (the inode's ctime,
 * which rename(2) sets). Percentiles over every file; the end state is checked as elsewhere.
 */
export async function measureWatch(base: string, seconds: number, rate: number) {
  const root = join(base, "watch")
  for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
  const proc = Bun.spawn(["bun", "packages/consumer/bin/consume.ts", "--root", root, "--watch", "--quiet"], {
    cwd: repo,
    stdin: "ignore",
    stdout: "ignore",
    stderr: "inherit",
  })
  // Start timing once the consumer is up: one file through end to end first.
  fs.writeFileSync(join(root, "tmp", "warm-up.json"), message(9_999_999))
  fs.renameSync(join(root, "tmp", "warm-up.json"), join(root, "inbox", "warm-up.json"))
  const upBy = performance.now() + 60_000
  while (!fs.existsSync(join(root, "done", "warm-up.json")) && performance.now() < upBy) await Bun.sleep(10)
  const arrivals = new Map<string, number>()
  const total = seconds * rate
  const started = performance.now()
  // Paced in 10 ms slices: at each slice, every message due by then is put in.
  for (let i = 0; i < total; ) {
    const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * rate) + 1)
    for (; i < due; i++) {
      const name = `w-${i.toString(36).padStart(6, "0")}.json`
      fs.writeFileSync(join(root, "tmp", name), message(10_000_000 + i))
      fs.renameSync(join(root, "tmp", name), join(root, "inbox", name))
      arrivals.set(name, performance.timeOrigin + performance.now())
    }
    await Bun.sleep(10)
  }
  const producedIn = (performance.now() - started) / 1000
  const deadline = performance.now() + 60_000
  while (countEntries(join(root, "done")) < total + 1 && performance.now() < deadline) await Bun.sleep(50)
  proc.kill("SIGTERM")
  await proc.exited
  const latencies: number[] = []
  for (const [name, at] of arrivals) latencies.push(fs.lstatSync(join(root, "done", name)).ctimeMs - at)
  expectDone(root, total + 1)
  return {
    messages: total,
    rate: total / producedIn,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    maxMs: Math.max(...latencies),
  }
}

export type WatchLatency = Awaited<ReturnType<typeof measureWatch>>
