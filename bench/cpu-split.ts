// Where a contender's CPU goes while it runs: each thread of its processes, a local PostgreSQL
// server's processes, and how busy the machine's cores were, read from /proc (Linux) every
// 100 ms; and with it, what the resident memory of its largest process is made of. A thread's
// or a process's CPU time is the last value read before it ended, so up to 100 ms of each may
// be missed, and a server process started after the first one and living less than a second
// may not be seen; the contender's total CPU (GNU time's) has no such gap.
import fs from "node:fs"

/** CPU seconds by kind of thread, and the machine's cores, over one contender's run. */
export interface CpuSplit {
  /** The main thread of each of the contender's processes. */
  readonly main: number
  /** The threads the program starts itself: consume's I/O thread (a Worker), floor-2t's second thread. */
  readonly workers: number
  /** The runtime's own threads: JIT compilers, garbage collector helpers, the allocator's scavenger. */
  readonly runtime: number
  /** Every `postgres` process on the machine (the server a consume-pg contender writes to), when asked for. */
  readonly server?: number
  /** The share of all cores that was busy (neither idle nor waiting for I/O) over the run, 0 to 1. */
  readonly busy: number
  /**
   * The most resident memory any one of the contender's processes had in anonymous pages (its
   * heaps, buffers, caches), and in pages of mapped files (its executable and libraries: for
   * Bun, the parts of its 100 MB binary it ran), in MB; read with the CPU, so a peak shorter
   * than 100 ms can be missed (the table's peak RSS, GNU time's, misses none).
   */
  readonly anonMb: number
  readonly filesMb: number
}

/** A process's resident anonymous and file-backed memory, in kB, from its /proc status. */
function residentKb(pid: number): { anon: number; files: number } | undefined {
  let status: string
  try {
    status = fs.readFileSync(`/proc/${pid}/status`, "utf8")
  } catch {
    return undefined
  }
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? 0)
  return { anon: kb("RssAnon"), files: kb("RssFile") }
}

/** Linux's clock ticks per second in /proc (USER_HZ, 100 on every architecture Linux runs Bun on). */
const ticksPerSecond = 100

/** One thread's CPU ticks and kind, from its /proc stat line. */
function readTask(path: string): { comm: string; ticks: number } | undefined {
  let line: string
  try {
    line = fs.readFileSync(path, "utf8")
  } catch {
    return undefined // ended since it was listed
  }
  const close = line.lastIndexOf(")")
  const fields = line.slice(close + 2).split(" ")
  // After the name: state is field 3, utime 14 and stime 15 (proc(5)).
  return { comm: line.slice(line.indexOf("(") + 1, close), ticks: Number(fields[11]) + Number(fields[12]) }
}

function children(pid: number): number[] {
  try {
    return fs
      .readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .split(" ")
      .filter((s) => s !== "")
      .map(Number)
  } catch {
    return []
  }
}

function idleAndTotal(): [number, number] {
  const cpu = (fs.readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "").split(/\s+/).slice(1).map(Number)
  const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0)
  return [(cpu[3] ?? 0) + (cpu[4] ?? 0), total]
}

/**
 * Samples the processes under `roots` (a command wrapper such as GNU time is left out: only
 * processes whose name is not `time` count) until `stop`. `server`: also the CPU of every
 * `postgres` process. Undefined where /proc is missing.
 */
export function sampleCpu(roots: readonly number[], server: boolean): { stop(): CpuSplit } | undefined {
  if (!fs.existsSync("/proc/stat")) return undefined
  /** Per thread (pid/tid): its kind and the last ticks read. */
  const threads = new Map<string, { kind: "main" | "workers" | "runtime"; ticks: number }>()
  let anonKb = 0
  let filesKb = 0
  /** Per postgres process: ticks at its first reading (0 for one started during the run) and last. */
  const servers = new Map<number, { first: number; last: number }>()
  // Every process is looked at until the contender's first backend appears, then once a second
  // (a later backend is found within that second); the postgres ones at every reading. Reading
  // all of /proc ten times a second for a whole run took the bench 4% of a core.
  let listedAt = 0
  const readServers = (isFirst: boolean) => {
    const hasNew = [...servers.values()].some((s) => s.first === 0)
    const isListing = isFirst || !hasNew || performance.now() - listedAt >= 1000
    if (isListing) listedAt = performance.now()
    const pids = isListing ? fs.readdirSync("/proc").map(Number) : [...servers.keys()]
    for (const pid of pids) {
      if (!Number.isInteger(pid)) continue
      const t = readTask(`/proc/${pid}/stat`)
      if (t === undefined || !t.comm.startsWith("postgres")) continue
      const s = servers.get(pid)
      if (s === undefined) servers.set(pid, { first: isFirst ? t.ticks : 0, last: t.ticks })
      else s.last = t.ticks
    }
  }
  const poll = () => {
    const pids = [...roots]
    for (let i = 0; i < pids.length; i++) pids.push(...children(pids[i] as number))
    for (const pid of pids) {
      const main = readTask(`/proc/${pid}/stat`)
      if (main === undefined || main.comm === "time") continue
      const resident = residentKb(pid)
      anonKb = Math.max(anonKb, resident?.anon ?? 0)
      filesKb = Math.max(filesKb, resident?.files ?? 0)
      let tids: string[]
      try {
        tids = fs.readdirSync(`/proc/${pid}/task`)
      } catch {
        continue
      }
      for (const tid of tids) {
        const t = readTask(`/proc/${pid}/task/${tid}/stat`)
        if (t === undefined) continue
        // A thread a C program starts keeps the program's name; Bun names its Workers so and
        // its own threads otherwise (JITWorker, HeapHelper, ...).
        const kind = Number(tid) === pid ? "main" : t.comm === "Worker" || t.comm === main.comm ? "workers" : "runtime"
        threads.set(`${pid}/${tid}`, { kind, ticks: t.ticks })
      }
    }
    if (server) readServers(false)
  }
  const [idle0, total0] = idleAndTotal()
  if (server) readServers(true)
  const timer = setInterval(poll, 100)
  return {
    stop(): CpuSplit {
      clearInterval(timer)
      const [idle1, total1] = idleAndTotal()
      const sum = (kind: string) =>
        [...threads.values()].filter((t) => t.kind === kind).reduce((a, t) => a + t.ticks, 0) / ticksPerSecond
      const serverTicks = [...servers.values()].reduce((a, s) => a + s.last - s.first, 0)
      return {
        main: sum("main"),
        workers: sum("workers"),
        runtime: sum("runtime"),
        ...(server && { server: serverTicks / ticksPerSecond }),
        busy: total1 > total0 ? 1 - (idle1 - idle0) / (total1 - total0) : Number.NaN,
        anonMb: anonKb / 1024,
        filesMb: filesKb / 1024,
      }
    },
  }
}
