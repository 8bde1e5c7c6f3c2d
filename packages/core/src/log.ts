/**
 * How much a command says on stderr: quiet = only what needs a person (conflicts, recoveries,
 * failures), info = the run's summary, rejections and progress too, verbose = one line per
 * claim and per duplicate too.
 */
export type LogLevel = "quiet" | "info" | "verbose"

/** Human text (default) or one JSON object per line. */
export type LogFormat = "text" | "json"

/** A structured log: every line is a message (an event's name) plus fields. */
export interface Log {
  /** Something an operator should look at (rejections, recoveries, conflicts, refusals). */
  warn(event: string, fields?: Record<string, unknown>): void
  /** The outcome of a run, its one-line summary: said unless quiet, which is silent on success. */
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

// The fields every line starts with; a caller's field of the same name cannot replace them.
const reserved = new Set(["time", "level", "msg"])

/**
 * A log to stderr in the chosen format and level, each line with its time, level and message.
 * Text lines are logfmt: `time=2026-12-02T15:00:00.123Z level=warn msg=conflict file=a.json
 * msg_id=m-1`, a nested object's fields as dotted keys (`reasons.parse=1`); JSON lines are
 * `{"time","level","msg",...fields}`, an object field kept an object.
 */
export function createLog(
  level: LogLevel = "info",
  format: LogFormat = "text",
  write: ((line: string) => void) | LogOptions = {},
): Log {
  const o: LogOptions = typeof write === "function" ? { write } : write
  const out = o.write ?? ((line: string) => void process.stderr.write(line))
  const color = format === "text" && (o.color ?? isColorWanted())
  const emit = (lvl: "warn" | "notice" | "info" | "debug", msg: string, fields: Record<string, unknown> = {}) => {
    const defined = Object.entries({ ...fields, ...o.fields }).filter(([k, v]) => v !== undefined && !reserved.has(k))
    const time = new Date().toISOString()
    if (format === "json") {
      const record = { time, level: lvl, msg, ...Object.fromEntries(defined) }
      out(`${JSON.stringify(record, jsonValue)}\n`)
      return
    }
    const pairs = [`time=${time}`, `level=${color ? paint(lvl) : lvl}`, `msg=${logfmtValue(msg)}`]
    for (const [k, v] of defined) pairs.push(...logfmtPairs(k, v))
    out(`${pairs.join(" ")}\n`)
  }
  return {
    warn: (e, f) => emit("warn", e, f),
    notice: (e, f) => level !== "quiet" && emit("notice", e, f),
    info: (e, f) => level !== "quiet" && emit("info", e, f),
    debug: (e, f) => level === "verbose" && emit("debug", e, f),
  }
}

function jsonValue(_key: string, value: unknown): unknown {
  if (typeof value === "bigint") return value.toString()
  if (value instanceof Error) return value.message
  return value
}

/** One field as logfmt pairs: a plain object's fields each under `key.field`, anything else one pair. */
function logfmtPairs(key: string, v: unknown): string[] {
  if (typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Error)) {
    const entries = Object.entries(v).filter(([, x]) => x !== undefined)
    if (entries.length > 0) return entries.flatMap(([k, x]) => logfmtPairs(`${key}.${k}`, x))
  }
  return [`${key}=${textValue(v)}`]
}

function textValue(v: unknown): string {
  if (typeof v === "string") return logfmtValue(v)
  if (v instanceof Error) return logfmtValue(v.message)
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint" || v === null) return String(v)
  return logfmtValue(JSON.stringify(v, jsonValue) ?? String(v))
}

// What makes a value need quotes: a space, `=`, `"`, or a character a terminal would hide or
// show as something else: controls (C0, DEL, C1), format characters (bidi overrides, zero-width),
// line and paragraph separators, spaces other than U+0020.
const needsQuotes = /[\s="\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Zs}]/u
// The ones JSON.stringify leaves raw inside the quotes (it escapes C0 itself).
const hidden = /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]/gu

/**
 * A value by logfmt's rules: bare unless it is empty or holds a space, `=`, `"` or a hidden
 * character; then double-quoted, with `"` and `\` escaped and every hidden character as a JSON
 * escape (`\n`, `\u001b`, `\u202e`), so a value never breaks a line, forges a field or passes
 * for another on a terminal, and a JSON string parser reads it back exactly.
 */
export function logfmtValue(v: string): string {
  if (v !== "" && !needsQuotes.test(v)) return v
  return JSON.stringify(v).replace(hidden, (c) => `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`)
}

function paint(lvl: "warn" | "notice" | "info" | "debug"): string {
  if (lvl === "warn") return `\x1b[33m${lvl}\x1b[39m`
  return lvl === "debug" ? `\x1b[2m${lvl}\x1b[22m` : lvl
}
