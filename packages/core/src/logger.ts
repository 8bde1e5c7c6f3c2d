// What an application hands the library to log through, and spool's Log over it.
import type { Log } from "./log.ts"

/** The levels spool logs at through an application's logger. */
export type LoggerLevel = "debug" | "info" | "warn" | "error"

/**
 * A pino-compatible logger: each method takes an object of fields first, then the message, as
 * pino's (and its child loggers') do, so a pino logger is passed as it is. spool calls `error`
 * (a handler threw: `handler-failed`, the Error as `err`), `warn` (what needs a person:
 * conflicts, recoveries, a broker connection lost), `info` (rejections, deferrals, a watch
 * starting) and `debug` (claims, duplicates).
 */
export interface Logger {
  debug(fields: Record<string, unknown>, msg: string): void
  info(fields: Record<string, unknown>, msg: string): void
  warn(fields: Record<string, unknown>, msg: string): void
  error(fields: Record<string, unknown>, msg: string): void
}

/** spool's Log with the error level a library consumer also logs at. */
export interface LibraryLog extends Log {
  /** A handler threw (not a TransientError, which the engine logs as a deferral). */
  error(event: string, fields?: Record<string, unknown>): void
}

/** A function spool calls once per log event with its level, its message (the event's name) and its fields. */
export type LogFunction = (level: LoggerLevel, msg: string, fields: Record<string, unknown>) => void

/** spool's Log writing through an application's logger or function; a summary (notice) is logged at info. */
export function logThrough(logger: Logger | LogFunction): LibraryLog {
  const at =
    typeof logger === "function"
      ? (level: LoggerLevel) =>
          (msg: string, fields: Record<string, unknown> = {}) =>
            logger(level, msg, fields)
      : (level: LoggerLevel) =>
          (msg: string, fields: Record<string, unknown> = {}) =>
            logger[level](fields, msg)
  return { error: at("error"), warn: at("warn"), notice: at("info"), info: at("info"), debug: at("debug") }
}
