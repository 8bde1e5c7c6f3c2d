// Watch-mode latency: how long a file waits between its arrival in inbox/ and done/.
import fs from "node:fs"
import { join } from "node:path"
import { countEntries, expectDone } from "./end-state.ts"
import { percentile } from "./figures.ts"
import { message } from "./generated-queue.ts"
import { repo } from "./shell.ts"

/** What the producer thread posts back: each file's name and when its rename into inbox/ returned. */
interface Produced {
  readonly arrivals: [string, number][]
  readonly seconds: number
}

/** The wall clock in ms, sub-millisecond, comparable between this thread and the producer's. */
const wallMs = () => performance.timeOrigin + performance.now()

/**
 * Watch-mode latency: `consume --watch` (durable, defaults) runs while a producer thread puts
 * `rate` messages per second into inbox/ for `seconds`, the Maildir way (tmp/, then rename),
 * stamping each rename into inbox/ as it returns. This thread, otherwise idle, stamps each
 * file's arrival in done/ as its inotify event comes in (a few tens of microseconds after the
 * rename; the inode's ctime would be rounded to the kernel's tick, 4 ms at HZ=250). A file
 * whose event was lost (an inotify overflow) falls back to its ctime, and the count of those
 * is returned. Percentiles over every file; the end state is checked as elsewhere.
 */
export async function measureWatch(base: string, seconds: number, rate: number) {
  const root = join(base, `watch-${rate}`)
  for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
  const inDone = new Map<string, number>()
  const watcher = fs.watch(join(root, "done"), (_type, name) => {
    if (name !== null && !inDone.has(String(name))) inDone.set(String(name), wallMs())
  })
  const proc = Bun.spawn(["bun", "packages/consumer/bin/consume.ts", "--root", root, "--watch", "--quiet"], {
    cwd: repo,
    stdin: "ignore",
    stdout: "ignore",
    stderr: "inherit",
  })
  try {
    // Start timing once the consumer is up: one file through end to end first.
    fs.writeFileSync(join(root, "tmp", "warm-up.json"), message(9_999_999))
    fs.renameSync(join(root, "tmp", "warm-up.json"), join(root, "inbox", "warm-up.json"))
    const upBy = performance.now() + 60_000
    while (!fs.existsSync(join(root, "done", "warm-up.json")) && performance.now() < upBy) await Bun.sleep(10)
    const total = seconds * rate
    const produced = await produce(root, total, rate)
    const deadline = performance.now() + 60_000
    while (countEntries(join(root, "done")) < total + 1 && performance.now() < deadline) await Bun.sleep(50)
    await Bun.sleep(50) // the last events
    const latencies: number[] = []
    let fromCtime = 0
    for (const [name, at] of produced.arrivals) {
      let reached = inDone.get(name)
      if (reached === undefined) {
        fromCtime++
        reached = fs.lstatSync(join(root, "done", name)).ctimeMs
      }
      latencies.push(reached - at)
    }
    expectDone(root, total + 1)
    return {
      messages: total,
      rate: total / produced.seconds,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      maxMs: Math.max(...latencies),
      fromCtime,
    }
  } finally {
    watcher.close()
    proc.kill("SIGTERM")
    await proc.exited
  }
}

/** Runs the producer on a thread of its own, so that this thread's event loop is free to stamp arrivals. */
function produce(root: string, total: number, rate: number): Promise<Produced> {
  const worker = new Worker(new URL("./watch-producer.ts", import.meta.url).href)
  return new Promise<Produced>((resolve, reject) => {
    worker.onmessage = (e: MessageEvent<Produced>) => {
      resolve(e.data)
      worker.terminate()
    }
    worker.onerror = (e) => {
      reject(new Error(`watch producer: ${e.message}`))
      worker.terminate()
    }
    worker.postMessage({ root, total, rate })
  })
}

export type WatchLatency = Awaited<ReturnType<typeof measureWatch>>
