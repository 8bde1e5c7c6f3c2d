import { availableParallelism } from "node:os"
import {
  bytes,
  type CommandSpec,
  choice,
  duration,
  flag,
  holdStopRequest,
  integer,
  ledger,
  root,
  runCommand,
  text,
} from "@spool/cli"
import {
  collectGarbageEvery,
  consume,
  createLog,
  defaults,
  ExitCode,
  isColorWanted,
  isMessageName,
  type Log,
  type LogFormat,
  type LogLevel,
  maxMessageBytes,
  type OpenLedgerOptions,
  openExistingLedger,
  openLedger,
  openQueue,
  openSource,
  type Queue,
  resolveLedgerUrl,
  resolveRoot,
  type SourcePort,
  SpoolError,
  scanDir,
  sourceSchemes,
  watch,
  writeFileAtomic,
  writeReports,
} from "@spool/core/engine"
import { createProgress, noProgress, type Progress } from "./progress.ts"
import { runWorkers } from "./workers.ts"

/** `bun run consume`'s options and help. */
export const spec = {
  name: "consume",
  usage: "bun run consume [--root DIR] [options]",
  summary: "Drains inbox/ into the ledger, exactly once per msg_id; --watch keeps running.",
  description:
    "Claims each *.json file in ROOT/inbox/ by rename into processing/, validates it, records it in\n" +
    "the ledger (a msg_id seen before is a duplicate), then moves it to done/ or error/. Ends by\n" +
    "rewriting ROOT/dup.txt, ROOT/error.csv and ROOT/conflicts.csv. SIGINT/SIGTERM/SIGHUP finish the\n" +
    "batches in hand and stop cleanly: exit 0 in watch mode, 4 for a one-shot drain that stopped before\n" +
    "inbox/ was empty.\n" +
    "With --watch it keeps running: it drains, then waits for new files (inotify events on inbox/, plus\n" +
    "a rescan every --rescan as a safety net) and drains again, recovering dead consumers' claims each time.\n" +
    "With --source URL it consumes a broker instead of inbox/\n" +
    `(${sourceSchemes.map((s) => `${s}//`).join(", ")}; docs/brokers.md):\n` +
    "each delivery lands as a file in processing/, goes the way files go, and is acknowledged once moved;\n" +
    "it drains until the broker has nothing for --idle-wait, or with --watch runs until stopped.",
  options: {
    root,
    ledger: { ...ledger, help: "a postgres:// ledger shared by consumers on many hosts" },
    "batch-size": integer("messages per ledger transaction", { default: String(defaults.batchSize), min: 1 }),
    "max-attempts": integer("claims before a message that keeps crashing the consumer is poison (one of them alone)", {
      default: String(defaults.maxAttempts),
      min: 2,
    }),
    "max-bytes": bytes("larger files go to error/ as too-large, unread; at most 1g", { default: "1m", min: 1 }),
    "min-age": duration("skip files modified more recently than this, e.g. 5s", { default: "0s", example: "5s" }),
    "defer-first": duration("after a transient failure (TransientError), try the message again this much later", {
      default: "5m",
      min: 1,
    }),
    "defer-max": duration("the longest wait between two attempts of a deferred message (the delay doubles)", {
      default: "1h",
      min: 1,
    }),
    "defer-max-age": duration(
      "a message still failing transiently this long after its first deferral goes to error/ as expired",
      {
        default: "5d",
        min: 1,
      },
    ),
    "busy-timeout": duration(
      "wait this long for a ledger lock another process or session holds, then exit 3 (PostgreSQL: lock_timeout)",
      { default: "10s" },
    ),
    "no-fsync": flag("skip fsyncs: survives a process crash, not a power loss (see docs/operating.md, Durability)"),
    "one-thread": flag(
      "do the renames and reads on the main thread too, instead of on a second thread that overlaps them with the ledger work (for a one-core machine)",
    ),
    source: text(
      "URL",
      "consume a broker instead of inbox/: amqp://USER:PASS@HOST:5672/?queue=Q, nats://HOST:4222/?stream=S&consumer=C, redis://HOST:6379/?stream=S&group=G or mqtt://HOST:1883/?topic=F&client=ID",
    ),
    "idle-wait": duration("with --source: a drain ends when the broker has nothing for this long", {
      default: "1s",
      min: 1,
    }),
    watch: flag("keep running and consume new files as they arrive, until SIGINT/SIGTERM/SIGHUP", { short: "w" }),
    rescan: duration("with --watch: look at inbox/ at least this often even without events", {
      default: "5s",
      min: 1,
    }),
    "batch-window": duration(
      "with --watch: after a new file, wait this long before taking it (default none: what arrives during a commit is taken in the next)",
      { default: "0ms" },
    ),
    concurrency: integer(
      `run N consumer processes on this root, at most ${maxConcurrency()} here (4 per core); the exit code is the worst one's`,
      { default: "1", min: 1 },
    ),
    "new-ledger": flag(
      "start a new, empty ledger although the root has history (files in done/, error/ or archive/, its binding record): the ledger was lost and starting over is intended, so messages processed before can be processed again",
    ),
    "no-progress": flag("no progress bar (it is only ever drawn when stderr is a terminal)"),
    quiet: flag(
      "nothing on success: only conflicts, recoveries, refusals and failures (rejected files are counted in error.csv)",
      { short: "q" },
    ),
    verbose: flag("also one line per claimed file and per duplicate", { short: "v" }),
    "log-format": choice("FORMAT", ["text", "json"], "text, or json: one object per line (time, level, msg, fields)", {
      default: "text",
    }),
    "stats-json": text("FILE", "after the run, write the summary and each batch's duration in ms to FILE (for bench/)"),
  },
  exitCodes: [0, 2, 3, 4],
  examples: [
    {
      args: "--root /srv/spool/orders -q",
      does: "drain inbox/ once, silent unless something needs a person (for cron)",
    },
    { args: "--root /srv/spool/orders --watch", does: "keep consuming new files until SIGTERM (for systemd)" },
    {
      args: "--root /srv/spool/orders --source amqp://guest:guest@localhost/?queue=orders",
      does: "consume a RabbitMQ queue, each delivery acknowledged after its commit",
    },
  ],
} satisfies CommandSpec

/** `bun run consume`: one-shot drain of a queue. */
export async function main(argv: readonly string[]): Promise<number> {
  // Held from before the arguments are read: a signal at any instant stops the run as documented.
  const stop = holdStopRequest()
  // A function, not the property: a check early in the run must not narrow the later ones.
  const isStopRequested = () => stop.signal.aborted
  return runCommand(spec, argv, async ({ values: v, texts }) => {
    const format: LogFormat = v["log-format"]
    const level: LogLevel = v.quiet ? "quiet" : v.verbose ? "verbose" : "info"
    const durable = !v["no-fsync"]
    // This process is spool's own: keep its garbage, and so its footprint, small. A young
    // collection every 1000 files, a full one every 4000: the same peak as a full one every
    // 2000, for less of the main thread (bench/results/epyc-fc-v1045.md, Collections).
    collectGarbageEvery(1000, 4000)
    const queue = openQueue(resolveRoot(v.root))
    const ledgerUrl = resolveLedgerUrl(v.ledger)
    // Every option was parsed before the body runs, before any worker starts, so a usage error
    // is reported once.
    const concurrency = v.concurrency
    if (concurrency > maxConcurrency())
      throw new SpoolError(
        "usage",
        `--concurrency takes at most ${maxConcurrency()} on this machine (4 per core, ${availableParallelism()} cores), not ${concurrency}: more processes only queue for the ledger's write lock. One consume already keeps two cores busy`,
      )
    const isWatching = v.watch
    const sourceUrl = v.source
    if (sourceUrl !== undefined && concurrency > 1)
      throw new SpoolError(
        "usage",
        "--concurrency does not take --source: start several `consume --source` processes on the root instead; the broker shares its deliveries among them",
      )
    if (v["max-bytes"] > maxMessageBytes)
      throw new SpoolError(
        "usage",
        `--max-bytes ${texts["max-bytes"]} is more than a message may have: at most 1g (each message is read whole into memory)`,
      )
    if (v["defer-first"] > v["defer-max"])
      throw new SpoolError(
        "usage",
        `--defer-first (${texts["defer-first"]}) is longer than --defer-max (${texts["defer-max"]}), the longest wait between two attempts: lower --defer-first or raise --defer-max`,
      )
    const rescanMs = v.rescan
    const batchWindowMs = v["batch-window"]
    const busyTimeoutMs = v["busy-timeout"]
    const opening = { url: ledgerUrl, durable, busyTimeoutMs, isNewLedgerAllowed: v["new-ledger"] }
    const tuning = {
      batchSize: v["batch-size"],
      maxAttempts: v["max-attempts"],
      maxBytes: v["max-bytes"],
      minAgeMs: v["min-age"],
      defer: { firstMs: v["defer-first"], maxMs: v["defer-max"], maxAgeMs: v["defer-max-age"] },
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
    if (worker) stopWithParent(log)
    const onStop = () =>
      log.info("stopping", { signal: String(stop.signal.reason), note: "finishing the batches in hand" })
    if (isStopRequested()) onStop()
    else stop.signal.addEventListener("abort", onStop, { once: true })
    // Stopped before the run began: nothing was touched, and nothing is.
    const stoppedEarly = () => (!isWatching && backlogOf(queue) > 0 ? ExitCode.interrupted : ExitCode.ok)
    if (isStopRequested()) return stoppedEarly()
    if (concurrency > 1) {
      // Opened once before the workers start: a ledger refused or damaged is reported once,
      // and a new one is created and migrated once.
      await (await openLedger(queue, opening)).close()
      if (isStopRequested()) return stoppedEarly()
      const workers = await runWorkers(concurrency, argv, log, isWatching)
      const { isAnyKilled } = workers
      // Workers stopped before they began say nothing of the backlog they left.
      const code =
        isStopRequested() && !isWatching && backlogOf(queue) > 0
          ? Math.max(workers.code, ExitCode.interrupted)
          : workers.code
      // A worker killed mid-batch leaves up to three batches in processing/ with their claims
      // (one that failed otherwise handed its files back itself): taken back here, by recovery
      // alone, so that exit 3 keeps its promise without waiting for the next run.
      if (isAnyKilled) await recoverWorkers(queue, opening, log)
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
    let source: SourcePort | undefined
    try {
      if (sourceUrl !== undefined) source = await openSource(sourceUrl, { log, root: queue.root, signal: stop.signal })
    } catch (error) {
      await ledger.close()
      // Stopped while the broker was out of reach: nothing was received, and nothing is.
      if (isStopRequested()) return stoppedEarly()
      throw error
    }
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
      const summary = source
        ? await consume({ ...options, source, idleWaitMs: v["idle-wait"], untilStopped: isWatching })
        : isWatching
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
      if (!isWatching || source) await writeReports(queue, ledger)
      const seconds = ((performance.now() - started) / 1000).toFixed(2)
      const hasReasons = Object.keys(summary.rejectedBy).length > 0
      log.notice("done", {
        files: summary.claimed,
        processed: summary.processed,
        duplicates: summary.duplicates,
        conflicts: summary.conflicts,
        rejected: summary.rejected,
        ...(hasReasons && { reasons: summary.rejectedBy }),
        recovered: summary.recovered,
        ...(summary.lost > 0 && { lost: summary.lost }),
        ...(summary.deferred > 0 && { deferred: summary.deferred }),
        ...(summary.tooYoung > 0 && { too_young: summary.tooYoung }),
        ...(source && { redelivered: summary.redelivered }),
        seconds: Number(seconds),
        ...(isStopRequested() && { stopped: "by signal" }),
      })
      // After the run: a file that cannot be written fails the command (exit 3) with the done line above.
      if (v["stats-json"])
        writeFileAtomic(v["stats-json"], JSON.stringify({ ...summary, seconds: Number(seconds), batchMs }))
      // A drain cut short says so, so that `consume && next` does not go on as if it had drained.
      // A drain of a source cut short cannot know what the broker still holds: it says so too.
      const isCutShort = source ? isStopRequested() : backlogOf(queue) > 0
      return !isWatching && isStopRequested() && isCutShort ? ExitCode.interrupted : ExitCode.ok
    } finally {
      progress.finish()
      await source?.close()
      await ledger.close()
    }
  }).finally(() => stop.release())
}

/** The most --concurrency workers this machine takes: 4 per core. */
function maxConcurrency(): number {
  return 4 * availableParallelism()
}

/**
 * Recovery alone, after a worker failed: the claims of workers that died are adopted and their
 * files finished (committed ones moved, the others processed again), nothing new is claimed.
 */
async function recoverWorkers(queue: Queue, opening: OpenLedgerOptions, log: Log): Promise<void> {
  try {
    const ledger = await openLedger(queue, opening)
    try {
      const stopped = new AbortController()
      stopped.abort()
      const s = await consume({ queue, ledger, log, signal: stopped.signal, durable: opening.durable !== false })
      if (s.recovered > 0) log.warn("workers-recovered", { files: s.recovered })
    } finally {
      await ledger.close()
    }
  } catch (error) {
    // The workers' exit code already says the run failed; what is left waits with its claims.
    if (!(error instanceof SpoolError)) throw error
    log.warn("workers-not-recovered", {
      error: error.message,
      note: "the killed worker's files wait in processing/ with their claims; the next consume finishes them",
    })
  }
}

/**
 * A --concurrency worker stops, as on SIGTERM, once the process that started it is gone (killed
 * with SIGKILL, which it cannot pass on): a supervisor restarting that process would otherwise
 * find the old workers still consuming beside the new ones.
 */
function stopWithParent(log: Log): void {
  const parent = process.ppid
  const timer = setInterval(() => {
    if (process.ppid === parent) return
    clearInterval(timer)
    log.warn("parent-gone", { parent, note: "the --concurrency process that started this worker ended; stopping" })
    process.kill(process.pid, "SIGTERM")
  }, 1000)
  timer.unref()
}

/** Files a one-shot run will take: messages in inbox/ plus leftovers in processing/ for recovery. */
function backlogOf(queue: Queue): number {
  let n = 0
  for (const e of scanDir(queue.inbox, 1024)) if (isMessageName(e.name)) n++
  for (const _ of scanDir(queue.processing, 1024)) n++
  return n
}
