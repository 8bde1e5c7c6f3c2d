import fs from "node:fs"
import {
  type CommandSpec,
  collectGarbageEvery,
  consume,
  createLog,
  defaults,
  ExitCode,
  isColorWanted,
  isMessageName,
  type LogFormat,
  type LogLevel,
  openExistingLedger,
  openLedger,
  openQueue,
  parseBytes,
  parseDuration,
  parseInteger,
  type Queue,
  resolveLedgerUrl,
  resolveRoot,
  runCommand,
  SpoolError,
  scanDir,
  writeReports,
} from "@spool/core/engine"
import { createProgress, noProgress, type Progress } from "./progress.ts"
import { watch } from "./watch.ts"
import { runWorkers } from "./workers.ts"

const spec = {
  name: "consume",
  usage: "bun run consume [--root DIR] [options]",
  summary:
    "Drains ROOT/inbox/: claims each *.json file by rename into processing/, validates it, records it in\n" +
    "ROOT/ledger.db (a msg_id seen before is a duplicate), then moves it to done/ or error/. Ends by\n" +
    "rewriting ROOT/dup.txt and ROOT/error.csv. SIGINT/SIGTERM finish the batches in hand and stop cleanly.\n" +
    "With --watch it keeps running: it drains, then waits for new files (inotify events on inbox/, plus\n" +
    "a rescan every --rescan as a safety net) and drains again, recovering dead consumers' claims each time.",
  options: {
    root: { type: "string" },
    ledger: { type: "string" },
    "batch-size": { type: "string" },
    "max-attempts": { type: "string" },
    "max-bytes": { type: "string" },
    "min-age": { type: "string" },
    "busy-timeout": { type: "string" },
    "no-fsync": { type: "boolean" },
    "one-thread": { type: "boolean" },
    quiet: { type: "boolean", short: "q" },
    verbose: { type: "boolean", short: "v" },
    "log-format": { type: "string" },
    "stats-json": { type: "string" },
    watch: { type: "boolean", short: "w" },
    rescan: { type: "string" },
    "batch-window": { type: "string" },
    concurrency: { type: "string" },
    "no-progress": { type: "boolean" },
    "new-ledger": { type: "boolean" },
  },
  help: [
    "--root DIR            queue root (default: $SPOOL_ROOT, else ./spool)",
    "--ledger URL          a postgres:// ledger shared by consumers on many hosts (default: $SPOOL_LEDGER_URL,\n                        else SQLite in ROOT/ledger.db)",
    `--batch-size N        messages per ledger transaction (default ${defaults.batchSize})`,
    `--max-attempts N      claims before a message that keeps crashing the consumer is poison (default ${defaults.maxAttempts})`,
    "--max-bytes SIZE      larger files go to error/ as too-large, unread (default 1m)",
    "--min-age DURATION    skip files modified more recently than this, e.g. 2s (default 0)",
    "--busy-timeout DUR    wait this long for another process's ledger lock (default 10s)",
    "--no-fsync            skip fsyncs: survives a process crash, not a power loss (see README)",
    "--one-thread          do the renames and reads on the main thread too, instead of on a second\n                        thread that overlaps them with the ledger work (for a one-core machine)",
    "-w, --watch           keep running and consume new files as they arrive, until SIGINT/SIGTERM",
    "--rescan DURATION     with --watch: look at inbox/ at least this often even without events (default 5s)",
    "--batch-window DUR    with --watch: after a new file, wait this long to take the burst in one drain (default 50ms)",
    "--concurrency N       run N consumer processes on this root (default 1); exit code is the worst one's",
    "--new-ledger          start a new, empty ledger although done/ or error/ holds files (the ledger was lost\n                        and starting over is intended: messages processed before can be processed again)",
    "--no-progress         no progress bar (it is only ever drawn when stderr is a terminal)",
    "-q, --quiet           warnings only",
    "-v, --verbose         also one line per claimed file",
    "--log-format FORMAT   text (default) or json (one object per line: time, level, event, fields)",
    "--stats-json FILE     after the run, write the summary and each batch's duration in ms to FILE (for bench/)",
  ],
} satisfies CommandSpec<Record<string, { type: "string" | "boolean"; short?: string }>>

/** `bun run consume`: one-shot drain of a queue. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values: v }) => {
    const format = (v["log-format"] ?? "text") as LogFormat
    if (format !== "text" && format !== "json")
      throw new SpoolError("usage", `--log-format takes text or json, not ${JSON.stringify(format)}`)
    const level: LogLevel = v.quiet ? "quiet" : v.verbose ? "verbose" : "info"
    const durable = !v["no-fsync"]
    // This process is spool's own: keep its garbage, and so its footprint, small (about 12 ms
    // of the main thread per 2000 files on the bench machine; see BENCHMARKS.md, Memory).
    collectGarbageEvery(2000)
    const queue = openQueue(resolveRoot(v.root))
    const ledgerUrl = resolveLedgerUrl(v.ledger)
    // Every option is checked here, before any worker starts, so a usage error is reported once.
    const concurrency = v.concurrency ? parseInteger(v.concurrency, "--concurrency", 1) : 1
    const isWatching = v.watch === true
    const rescanMs = parseDuration(v.rescan ?? "5s", "--rescan")
    if (rescanMs <= 0) throw new SpoolError("usage", `--rescan must be longer than 0, not ${JSON.stringify(v.rescan)}`)
    const batchWindowMs = parseDuration(v["batch-window"] ?? "50ms", "--batch-window")
    const busyTimeoutMs = v["busy-timeout"] ? parseDuration(v["busy-timeout"], "--busy-timeout") : 10_000
    const opening = { url: ledgerUrl, durable, busyTimeoutMs, isNewLedgerAllowed: v["new-ledger"] === true }
    const tuning = {
      ...(v["batch-size"] && { batchSize: parseInteger(v["batch-size"], "--batch-size", 1) }),
      ...(v["max-attempts"] && { maxAttempts: parseInteger(v["max-attempts"], "--max-attempts", 1) }),
      ...(v["max-bytes"] && { maxBytes: parseBytes(v["max-bytes"], "--max-bytes") }),
      ...(v["min-age"] && { minAgeMs: parseDuration(v["min-age"], "--min-age") }),
      ...(v["one-thread"] && { pipeline: false }),
    }
    const progress: Progress =
      !isWatching && concurrency === 1 && !v["no-progress"] && format === "text" && process.stderr.isTTY
        ? createProgress({ total: backlogOf(queue), stream: process.stderr, color: isColorWanted() })
        : noProgress((line) => process.stderr.write(line))
    const worker = process.env.SPOOL_WORKER
    const log = createLog(level, format, {
      write: (line) => progress.write(line),
      ...(worker && { fields: { worker: Number(worker) } }),
    })
    if (concurrency > 1) {
      // Opened once before the workers start: a ledger refused or damaged is reported once,
      // and a new one is created and migrated once.
      await (await openLedger(queue, opening)).close()
      const code = await runWorkers(concurrency, argv, log)
      // Each worker wrote reports when it ended, and two such atomic rewrites can land out of
      // order; one more, after all of them, is sure to reflect the whole ledger.
      try {
        const ledger = await openExistingLedger(queue, opening)
        if (ledger === undefined) return code
        try {
          await writeReports(queue, ledger)
        } finally {
          await ledger.close()
        }
      } catch (error) {
        // The workers' own exit codes say more than this; report the failure without hiding them.
        if (!(error instanceof SpoolError)) throw error
        log.warn("reports-failed", { error: error.message })
        return Math.max(code, ExitCode.failure)
      }
      return code
    }
    const ledger = await openLedger(queue, opening)
    const stop = new AbortController()
    const onSignal = (signal: NodeJS.Signals) => {
      if (!stop.signal.aborted) log.info("stopping", { signal, note: "finishing the batches in hand" })
      stop.abort()
    }
    process.on("SIGINT", onSignal)
    process.on("SIGTERM", onSignal)
    const started = performance.now()
    const batchMs: number[] = []
    let lastBatchAt = started
    try {
      const options = {
        queue,
        ledger,
        durable,
        log,
        signal: stop.signal,
        onBatch: (s: { readonly claimed: number }) => {
          progress.update(s.claimed)
          if (v["stats-json"]) {
            const t = performance.now()
            batchMs.push(t - lastBatchAt)
            lastBatchAt = t
          }
        },
        ...tuning,
      }
      const summary = isWatching
        ? await watch({
            ...options,
            rescanMs,
            batchWindowMs,
            useEvents: process.env.SPOOL_WATCH_NO_EVENTS !== "1",
            onDrain: (d) =>
              log.info("drained", {
                files: d.claimed,
                processed: d.processed,
                duplicates: d.duplicates,
                rejected: d.rejected,
                recovered: d.recovered,
              }),
          })
        : await consume(options)
      progress.finish()
      if (!isWatching) await writeReports(queue, ledger)
      const seconds = ((performance.now() - started) / 1000).toFixed(2)
      const reasons = Object.entries(summary.rejectedBy)
        .map(([r, n]) => `${r} ${n}`)
        .join(", ")
      log.info("done", {
        files: summary.claimed,
        processed: summary.processed,
        duplicates: summary.duplicates,
        conflicts: summary.conflicts,
        rejected: summary.rejected,
        ...(reasons && { reasons }),
        recovered: summary.recovered,
        ...(summary.lost > 0 && { lost: summary.lost }),
        ...(summary.deferred > 0 && { deferred: summary.deferred }),
        seconds: Number(seconds),
        ...(stop.signal.aborted && { stopped: "by signal" }),
      })
      if (v["stats-json"])
        fs.writeFileSync(v["stats-json"], JSON.stringify({ ...summary, seconds: Number(seconds), batchMs }))
      return ExitCode.ok
    } finally {
      progress.finish()
      process.off("SIGINT", onSignal)
      process.off("SIGTERM", onSignal)
      await ledger.close()
    }
  })
}

/** Files a one-shot run will take: messages in inbox/ plus leftovers in processing/ for recovery. */
function backlogOf(queue: Queue): number {
  let n = 0
  for (const e of scanDir(queue.inbox, 1024)) if (isMessageName(e.name)) n++
  for (const _ of scanDir(queue.processing, 1024)) n++
  return n
}
