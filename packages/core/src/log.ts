/** How much a command says on stderr. */
export type LogLevel = "quiet" | "info" | "verbose"

/** Human text (default) or one JSON object per line. */
export type LogFormat = "text" | "json"

/** A structured log: every line is an event name plus fields. */
export interface Log {
  /** Something an operator should look at (recoveries, conflicts, refusals). */
  warn(event: string, fields?: Record<string, unknown>): void
  /** Normal progress (run summary). */
  info(event: string, fields?: Record<string, unknown>): void
  /** Per-message detail (claims, duplicates, rejections). */
  debug(event: string, fields?: Record<string, unknown>): void
}

/** A log that writes nothing (library default). */
export const silentLog: Log = { warn() {}, info() {}, debug() {} }

/** A log to stderr in the chosen format and level. */
export function createLog(
  level: LogLevel = "info",
  format: LogFormat = "text",
  write = (line: string) => process.stderr.write(line),
): Log {
  const emit = (lvl: string, event: string, fields: Record<string, unknown> = {}) => {
    if (format === "json") {
      write(`${JSON.stringify({ time: new Date().toISOString(), level: lvl, event, ...fields })}\n`)
      return
    }
    const parts = Object.entries(fields).map(
      ([k, v]) => `${k}=${typeof v === "string" && !/[\s"=]/.test(v) ? v : JSON.stringify(v)}`,
    )
    write(`spool: ${lvl === "info" ? "" : `${lvl}: `}${event}${parts.length > 0 ? ` ${parts.join(" ")}` : ""}\n`)
  }
  return {
    warn: (e, f) => emit("warn", e, f),
    info: (e, f) => level !== "quiet" && emit("info", e, f),
    debug: (e, f) => level === "verbose" && emit("debug", e, f),
  }
}
