import {
  type CommandSpec,
  consume,
  createLog,
  defaults,
  ExitCode,
  Ledger,
  type LogFormat,
  type LogLevel,
  openQueue,
  parseBytes,
  parseDuration,
  parseInteger,
  resolveRoot,
  runCommand,
  SpoolError,
  writeReports,
} from "@spool/core"

const spec = {
  name: "consume",
  usage: "bun run consume [--root DIR] [options]",
  summary:
    "Drains ROOT/inbox/: claims each *.json file by rename into processing/, validates it, records it in\n" +
    "ROOT/ledger.db (a msg_id seen before is a duplicate), then moves it to done/ or error/. Ends by\n" +
    "rewriting ROOT/dup.txt and ROOT/error.csv. SIGINT/SIGTERM finish the batch in hand and stop cleanly.",
  options: {
    root: { type: "string" },
    "batch-size": { type: "string" },
    "max-attempts": { type: "string" },
    "max-bytes": { type: "string" },
    "min-age": { type: "string" },
    "busy-timeout": { type: "string" },
    "no-fsync": { type: "boolean" },
    quiet: { type: "boolean", short: "q" },
    verbose: { type: "boolean", short: "v" },
    "log-format": { type: "string" },
  },
  help: [
    "--root DIR            queue root (default: $SPOOL_ROOT, else ./spool)",
    `--batch-size N        messages per ledger transaction (default ${defaults.batchSize})`,
    `--max-attempts N      claims before a message that keeps crashing the consumer is poison (default ${defaults.maxAttempts})`,
    "--max-bytes SIZE      larger files go to error/ as too-large, unread (default 1m)",
    "--min-age DURATION    skip files modified more recently than this, e.g. 2s (default 0)",
    "--busy-timeout DUR    wait this long for another process's ledger lock (default 10s)",
    "--no-fsync            skip fsyncs: survives a process crash, not a power loss (see README)",
    "-q, --quiet           warnings and errors only",
    "-v, --verbose         one line per duplicate and rejected file",
    "--log-format FORMAT   text (default) or json",
  ],
} satisfies CommandSpec<Record<string, { type: "string" | "boolean"; short?: string }>>

/** `bun run consume`: one-shot drain of a queue. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values: v }) => {
    const format = (v["log-format"] ?? "text") as LogFormat
    if (format !== "text" && format !== "json")
      throw new SpoolError("usage", `--log-format takes text or json, not ${JSON.stringify(format)}`)
    const level: LogLevel = v.quiet ? "quiet" : v.verbose ? "verbose" : "info"
    const log = createLog(level, format)
    const durable = !v["no-fsync"]
    const queue = openQueue(resolveRoot(v.root))
    const ledger = Ledger.open(queue.ledger, {
      durable,
      busyTimeoutMs: v["busy-timeout"] ? parseDuration(v["busy-timeout"], "--busy-timeout") : 10_000,
    })
    const stop = new AbortController()
    const onSignal = (signal: NodeJS.Signals) => {
      if (!stop.signal.aborted) log.info("stopping", { signal, note: "finishing the batch in hand" })
      stop.abort()
    }
    process.on("SIGINT", onSignal)
    process.on("SIGTERM", onSignal)
    const started = performance.now()
    try {
      const summary = await consume({
        queue,
        ledger,
        durable,
        log,
        signal: stop.signal,
        ...(v["batch-size"] && { batchSize: parseInteger(v["batch-size"], "--batch-size", 1) }),
        ...(v["max-attempts"] && { maxAttempts: parseInteger(v["max-attempts"], "--max-attempts", 1) }),
        ...(v["max-bytes"] && { maxBytes: parseBytes(v["max-bytes"], "--max-bytes") }),
        ...(v["min-age"] && { minAgeMs: parseDuration(v["min-age"], "--min-age") }),
      })
      writeReports(queue, ledger)
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
        seconds: Number(seconds),
        ...(stop.signal.aborted && { stopped: "by signal" }),
      })
      return ExitCode.ok
    } finally {
      process.off("SIGINT", onSignal)
      process.off("SIGTERM", onSignal)
      ledger.close()
    }
  })
}
