// The consume-served contender's console: `spool serve` on the root consume drains, and a load
// generator here asking it `rate` requests a second, in the mix an operator's browser and a
// Prometheus scrape make, for as long as the drain lasts. The requests are open-loop (each is
// sent when it is due, whether or not the ones before it were answered), so a console that falls
// behind shows it as latency, not as fewer requests.
import fs from "node:fs"
import { percentile } from "./figures.ts"
import { repo } from "./shell.ts"

/** What an overview in a browser, a scrape, a dashboard and an operator on the failures page ask. */
const mix = ["/", "/metrics", "/api/overview", "/failures"] as const

/** The console's side of one consume-served run. */
export interface ServedLoad {
  /** Requests sent, answered (any status), and answered with a status other than 200, by status. */
  readonly requests: number
  readonly answered: number
  readonly non200: Readonly<Record<string, number>>
  /** Requests that got no answer at all (a refused connection, a reset). */
  readonly failed: number
  /** Latency from sending to the whole body read, over the answered requests. */
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  /** The rate asked, and the rate achieved over the time the load ran. */
  readonly rateAsked: number
  readonly rate: number
  /** How long the load ran: the whole drain. */
  readonly seconds: number
  /** CPU time over the drain: the console's process (user + system), and this load generator's. */
  readonly consoleCpuSeconds: number
  readonly generatorCpuSeconds: number
  /** By path: requests answered and their p50 latency. */
  readonly byPath: Readonly<Record<string, { readonly answered: number; readonly p50Ms: number }>>
}

/** A running `spool serve` on a root; disposing of it ends the process. */
interface Console extends AsyncDisposable {
  readonly url: string
  /** The CPU time the process has used so far, in seconds. */
  cpuSeconds(): number
}

async function startConsole(root: string): Promise<Console> {
  const proc = Bun.spawn(["bun", "packages/spool/bin/spool.ts", "serve", "--root", root, "--port", "0"], {
    cwd: repo,
    env: { ...process.env, NO_COLOR: "1" },
    stdin: "ignore",
    stdout: "ignore",
    stderr: "pipe",
  })
  const reader = proc.stderr.getReader()
  const decoder = new TextDecoder()
  let said = ""
  while (!/ on (http:\S+)/.test(said)) {
    const { value, done } = await reader.read()
    if (done) throw new Error(`spool serve ended before listening: ${said}`)
    said += decoder.decode(value, { stream: true })
  }
  // Keep its stderr flowing (a request that fails is logged there) and show it after the run.
  void (async () => {
    for (;;) {
      const { value, done } = await reader.read()
      if (done) return
      process.stderr.write(`bench: serve: ${decoder.decode(value)}`)
    }
  })()
  return {
    url: / on (http:\S+)/.exec(said)?.[1] ?? "",
    cpuSeconds() {
      // utime and stime, fields 14 and 15 of /proc/PID/stat, in clock ticks (100 a second on Linux).
      const fields = fs.readFileSync(`/proc/${proc.pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
      return (Number(fields[11]) + Number(fields[12])) / 100
    },
    async [Symbol.asyncDispose]() {
      proc.kill()
      await proc.exited
    },
  }
}

/**
 * Runs `drain` with `spool serve` on `root` answering `rate` requests a second until the drain
 * ends. The console is started, and asked each page once, before `drain` is called: its start
 * and its first compilation are not part of the run.
 */
export async function whileServing<T>(
  root: string,
  rate: number,
  drain: () => Promise<T>,
): Promise<{ result: T; load: ServedLoad }> {
  await using server = await startConsole(root)
  for (const path of mix) await (await fetch(new URL(path, server.url))).arrayBuffer()
  const latencies: { path: string; ms: number }[] = []
  const non200: Record<string, number> = {}
  let failed = 0
  let sent = 0
  const inFlight = new Set<Promise<void>>()
  const ask = (path: string) => {
    const started = performance.now()
    const p = fetch(new URL(path, server.url))
      .then(async (res) => {
        await res.arrayBuffer()
        latencies.push({ path, ms: performance.now() - started })
        if (res.status !== 200) non200[res.status] = (non200[res.status] ?? 0) + 1
      })
      .catch(() => {
        failed++
      })
      .finally(() => inFlight.delete(p))
    inFlight.add(p)
  }
  let isDraining = true
  const cpuAtStart = { console: server.cpuSeconds(), generator: process.cpuUsage() }
  const started = performance.now()
  const drained = drain().finally(() => {
    isDraining = false
  })
  // Paced in 10 ms slices, as the watch bench paces its arrivals: every request due by now is sent.
  while (isDraining) {
    const due = Math.floor(((performance.now() - started) / 1000) * rate) + 1
    for (; sent < due; sent++) ask(mix[sent % mix.length] as string)
    await Promise.race([Bun.sleep(10), drained.catch(() => undefined)])
  }
  const seconds = (performance.now() - started) / 1000
  const consoleCpuSeconds = server.cpuSeconds() - cpuAtStart.console
  const generatorCpu = process.cpuUsage(cpuAtStart.generator)
  // The answers still on their way are counted, within a bound.
  await Promise.race([Promise.all(inFlight), Bun.sleep(30_000)])
  const result = await drained
  const ms = latencies.map((l) => l.ms)
  const byPath = Object.fromEntries(
    mix.map((path) => {
      const own = latencies.filter((l) => l.path === path).map((l) => l.ms)
      return [path, { answered: own.length, p50Ms: percentile(own, 50) }]
    }),
  )
  return {
    result,
    load: {
      requests: sent,
      answered: latencies.length,
      non200,
      failed,
      p50Ms: percentile(ms, 50),
      p99Ms: percentile(ms, 99),
      maxMs: ms.length === 0 ? Number.NaN : Math.max(...ms),
      rateAsked: rate,
      rate: sent / seconds,
      seconds,
      consoleCpuSeconds,
      generatorCpuSeconds: (generatorCpu.user + generatorCpu.system) / 1e6,
      byPath,
    },
  }
}
