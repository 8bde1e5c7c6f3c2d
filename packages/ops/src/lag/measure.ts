import fs from "node:fs"
import { entryPath, errnoOf, judgeEntry, type Queue, type QueueDir, SpoolError, scanDir } from "@spool/core/engine"
import { bucketOf, type Histogram, histogramEdgesMinutes } from "./histogram.ts"

/** How far behind a queue is: files per directory, the age of the oldest waiting ones, and when work last finished. */
export interface LagReport {
  readonly root: string
  /** Regular files in inbox/ that consume takes (its own rule, judgeEntry). */
  readonly inbox: number
  readonly processing: number
  readonly error: number
  readonly done: number
  /** Files in deferred/: transient failures waiting for their next attempt (due or not; the ledger knows when). */
  readonly deferred: number
  /** Regular files in inbox/ that consume leaves where they are: hidden names, names not ending in .json. */
  readonly ignored: number
  /** Seconds since the oldest file in inbox/ was written (its mtime); 0 when inbox/ is empty. */
  readonly oldestInboxAgeSeconds: number
  /** Seconds since the oldest file in processing/ was claimed (its ctime); 0 when it is empty. */
  readonly oldestProcessingAgeSeconds: number
  /**
   * Seconds since a file last entered or left done/ or error/: the newest mtime of those two
   * directories, which every rename into them sets (one stat each, however many files done/ holds).
   */
  readonly idleSeconds: number
  /** Files per age bucket in each waiting directory, when asked for. */
  readonly histogram?: Histogram
}

/**
 * Which timestamp dates a file: `mtime`, when its producer wrote it (kept by every rename, so
 * inbox/ age is the delay since the message was produced); `ctime`, which rename(2) sets on
 * Linux filesystems, so in processing/ it is the moment a consumer claimed the file and in
 * error/ the moment it was rejected.
 */
export type AgeClock = "mtime" | "ctime"

/**
 * The directories whose files wait for something, each with the clock that says since when:
 * the rows of the histogram, in order. A new queue state is one more entry here.
 */
export const waitingDirs = [
  { dir: "inbox", clock: "mtime" },
  { dir: "processing", clock: "ctime" },
  { dir: "error", clock: "ctime" },
  // Since each file was deferred (the rename into deferred/ sets its ctime).
  { dir: "deferred", clock: "ctime" },
] as const satisfies readonly { readonly dir: QueueDir; readonly clock: AgeClock }[]

/** The directories a finished file lands in: their mtimes say when work last finished. */
export const finishedDirs = ["done", "error"] as const satisfies readonly QueueDir[]

/** What one directory holds. */
export interface DirScan {
  readonly count: number
  readonly ignored: number
  /** The smallest timestamp among the counted files, in ms since the epoch. */
  readonly oldestMs: number | undefined
  /** Counted files per age bucket, when a histogram was asked for. */
  readonly buckets: number[] | undefined
}

/** How to read one directory: which names count, whether to date the files, whether to bucket them. */
export interface ScanOptions {
  /** `messages`: only names consume takes count, the other regular files are `ignored`. */
  readonly names: "messages" | "all"
  /** Date each file by this clock (an lstat per file); undefined counts from readdir alone. */
  readonly clock?: AgeClock
  readonly histogram?: boolean
  readonly now: number
}

/**
 * Counts the regular files directly in `path`, streaming the directory so memory stays flat at
 * any size. A file that vanishes between readdir and lstat (a consumer claimed it) is not
 * counted; neither is a directory, FIFO or link, which is no message waiting.
 */
export function scanQueueDir(path: string, o: ScanOptions): DirScan {
  let count = 0
  let ignored = 0
  let oldest: number | undefined
  const buckets = o.histogram === true ? histogramEdgesMinutes.map(() => 0).concat(0) : undefined
  for (const e of scanDir(path, 1024)) {
    const isKnown = isKnownType(e)
    if (isKnown && !e.isFile()) continue
    const fate = o.names === "messages" ? judgeEntry(path, e.name, 0, o.now) : "take"
    // A name that is not UTF-8 opens nothing under the spelling readdir gave: consume renames it
    // and takes it, so it waits, dated through the bytes scanDir kept (entryPath).
    const waits = fate === "take" || fate === "undecodable"
    if (isKnown && o.clock === undefined) {
      if (waits) count++
      else ignored++
      continue
    }
    const st = lstatOrGone(entryPath(path, e))
    if (st === undefined || !st.isFile()) {
      // Its bytes unknown (node:fs's readdir), it still waits, undated.
      if (fate === "undecodable" && isKnown) count++
      continue
    }
    if (!waits) {
      ignored++
      continue
    }
    count++
    if (o.clock === undefined) continue
    const t = o.clock === "mtime" ? st.mtimeMs : st.ctimeMs
    if (oldest === undefined || t < oldest) oldest = t
    if (buckets !== undefined) buckets[bucketOf(o.now - t)] = (buckets[bucketOf(o.now - t)] ?? 0) + 1
  }
  return { count, ignored, oldestMs: oldest, buckets }
}

function lstatOrGone(path: string | Buffer): fs.Stats | undefined {
  try {
    return fs.lstatSync(path)
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return undefined
    throw new SpoolError("io", `cannot read ${path}: ${String(error)}`, { cause: error })
  }
}

/** False when readdir could not tell the type (DT_UNKNOWN on some filesystems): lstat decides. */
function isKnownType(e: fs.Dirent): boolean {
  return (
    e.isFile() ||
    e.isDirectory() ||
    e.isSymbolicLink() ||
    e.isFIFO() ||
    e.isSocket() ||
    e.isBlockDevice() ||
    e.isCharacterDevice()
  )
}

/**
 * How much to measure: `counts` is one readdir per directory; `ages` adds an lstat per file
 * in inbox/ and processing/; `full` also counts done/, which grows without bound.
 */
export type LagDetail = "counts" | "ages" | "full"

/** Measures a queue; what a level leaves out is reported as 0. `histogram` dates every waiting file. */
export function measureLag(
  queue: Queue,
  detail: LagDetail,
  now = Date.now(),
  options: { readonly histogram?: boolean } = {},
): LagReport {
  const isDated = detail !== "counts" || options.histogram === true
  const scan = (dir: QueueDir, clock: AgeClock | undefined, histogram = false) => {
    // A root made before deferred/ existed, opened read-only, has none: nothing is deferred.
    if (dir === "deferred" && !fs.existsSync(queue.deferred))
      return {
        count: 0,
        ignored: 0,
        oldestMs: undefined,
        buckets: histogram ? histogramEdgesMinutes.map(() => 0).concat(0) : undefined,
      }
    try {
      return scanQueueDir(queue[dir], {
        names: dir === "inbox" ? "messages" : "all",
        ...(clock === undefined ? {} : { clock }),
        histogram,
        now,
      })
    } catch (error) {
      if (error instanceof SpoolError) throw error
      throw new SpoolError("io", `cannot read ${queue[dir]}: ${String(error)}`, { cause: error })
    }
  }
  const scans = new Map<QueueDir, DirScan>()
  for (const { dir, clock } of waitingDirs)
    scans.set(
      dir,
      scan(dir, isDated && (dir !== "error" || options.histogram === true) ? clock : undefined, options.histogram),
    )
  const age = (d: QueueDir) => {
    const t = scans.get(d)?.oldestMs
    return t === undefined ? 0 : Math.max(0, now - t) / 1000
  }
  const count = (d: QueueDir) => scans.get(d)?.count ?? 0
  const report: LagReport = {
    root: queue.root,
    inbox: count("inbox"),
    processing: count("processing"),
    error: count("error"),
    deferred: count("deferred"),
    done: detail === "full" ? scan("done", undefined).count : 0,
    ignored: scans.get("inbox")?.ignored ?? 0,
    oldestInboxAgeSeconds: age("inbox"),
    oldestProcessingAgeSeconds: age("processing"),
    idleSeconds: Math.max(0, now - lastFinishedMs(queue)) / 1000,
  }
  if (options.histogram !== true) return report
  const histogram: Record<string, readonly number[]> = {}
  for (const { dir } of waitingDirs) histogram[dir] = scans.get(dir)?.buckets ?? []
  return { ...report, histogram: histogram as Histogram }
}

/** When a file last entered or left done/ or error/, in ms since the epoch. */
function lastFinishedMs(queue: Queue): number {
  let newest = 0
  for (const d of finishedDirs) {
    try {
      newest = Math.max(newest, fs.statSync(queue[d]).mtimeMs)
    } catch (error) {
      throw new SpoolError("io", `cannot read ${queue[d]}: ${String(error)}`, { cause: error })
    }
  }
  return newest
}
