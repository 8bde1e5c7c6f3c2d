import { quoteName } from "./queue/names.ts"

/**
 * How much a command says on stderr: quiet = warnings and the run's summary, info = its
 * progress too (start, drains), verbose = one line per claim and per duplicate too.
 */
export type LogLevel = "quiet" | "info" | "verbose"

/** Human text (default) or one JSON object per line. */
export type LogFormat = "text" | "json"

/** A structured log: every line is an event name plus fields. */
export interface Log {
  /** Something an operator should look at (rejections, recoveries, conflicts, refusals). */
  warn(event: string, fields?: Record<string, unknown>): void
  /** The outcome of a run, its one-line summary: said at every level, quiet included. */
  notice(event: string, fields?: Record<string, unknown>): void
  /** A run's progress (watching, drains, stopping). */
  info(event: string, fields?: Record<string, unknown>): void
  /** Per-message detail (claims, duplicates). */
  debug(event: string, fields?: Record<string, unknown>): void
}

/** Where and how a log writes. */
interface LogOptions {
  /** Receives each finished line, newline included; defaults to stderr. */
  readonly write?: (line: string) => void
  /** Colour the level in text lines; defaults to stderr being a TTY and NO_COLOR unset. */
  readonly color?: boolean
  /** Fields added to every line (e.g. which worker wrote it); a line's own fields come first. */
  readonly fields?: Readonly<Record<string, unknown>>
}

/** A log that writes nothing (library default). */
export const silentLog: Log = { warn() {}, notice() {}, info() {}, debug() {} }

/** True when colour may be used on stderr: a TTY, and NO_COLOR (https://no-color.org) unset or empty. */
export function isColorWanted(env: NodeJS.ProcessEnv = process.env, isTTY = process.stderr.isTTY === true): boolean {
  return isTTY && !env.NO_COLOR && env.TERM !== "dumb"
}

// The fields every JSON line starts with; a caller's field of the same name cannot replace them.
const reserved = new Set(["time", "level", "event"])

/**
 * A log to stderr in the chosen format and level. Text lines read `spool: warn: conflict
 * file=a.json msg_id=m-1`; JSON lines are `{"time","level","event",...fields}`.
 */
export function createLog(
  level: LogLevel = "info",
  format: LogFormat = "text",
  write: ((line: string) => void) | LogOptions = {},
): Log {
  const o: LogOptions = typeof write === "function" ? { write } : write
  const out = o.write ?? ((line: string) => void process.stderr.write(line))
  const color = format === "text" && (o.color ?? isColorWanted())
  const emit = (lvl: "warn" | "notice" | "info" | "debug", event: string, fields: Record<string, unknown> = {}) => {
    const defined = Object.entries({ ...fields, ...o.fields }).filter(([k, v]) => v !== undefined && !reserved.has(k))
    if (format === "json") {
      const record = { time: new Date().toISOString(), level: lvl, event, ...Object.fromEntries(defined) }
      out(`${JSON.stringify(record, jsonValue)}\n`)
      return
    }
    const parts = defined.map(([k, v]) => `${k}=${textValue(v)}`)
    const tag = lvl === "info" || lvl === "notice" ? "" : `${color ? paint(lvl) : lvl}: `
    out(`spool: ${tag}${event}${parts.length > 0 ? ` ${parts.join(" ")}` : ""}\n`)
  }
  return {
    warn: (e, f) => emit("warn", e, f),
    notice: (e, f) => emit("notice", e, f),
    info: (e, f) => level !== "quiet" && emit("info", e, f),
    debug: (e, f) => level === "verbose" && emit("debug", e, f),
  }
}

function jsonValue(_key: string, value: unknown): unknown {
  if (typeof value === "bigint") return value.toString()
  if (value instanceof Error) return value.message
  return value
}

/** A bare word when it cannot be misread, else shell-quoted as file names are (see quoteName). */
function textValue(v: unknown): string {
  if (typeof v === "string") return quoteName(v)
  if (v instanceof Error) return quoteName(v.message)
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint" || v === null) return String(v)
  return JSON.stringify(v, jsonValue) ?? String(v)
}

function paint(lvl: "warn" | "debug"): string {
  return lvl === "warn" ? `\x1b[33m${lvl}\x1b[39m` : `\x1b[2m${lvl}\x1b[22m`
}
