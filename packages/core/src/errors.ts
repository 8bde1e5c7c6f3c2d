/** Every failure code a spool command can raise; each maps to one exit code in the README. */
export type SpoolErrorCode =
  | "usage" // bad arguments or options
  | "not-a-queue" // the root is missing a directory or is not a directory
  | "cross-device" // queue directories on different filesystems
  | "ledger" // the ledger cannot be opened, is locked, read-only or corrupt
  | "unsafe-ledger" // refused before opening: a symlinked ledger file, or a new ledger beside a queue with history
  | "io" // a filesystem operation failed (disk full, permission denied)
  | "refused" // an operator command declined to change anything

/** The one error class for real failures; expected outcomes (a bad message) are values, not throws. */
export class SpoolError extends Error {
  override readonly name = "SpoolError"
  constructor(
    readonly code: SpoolErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

/** Exit codes shared by every command (the README's table is generated from the same facts). */
export const ExitCode = {
  ok: 0,
  /** A check found something: lag over threshold, order problems, replay refused. */
  check: 1,
  /** The command was called wrongly or pointed at something that is not a queue. */
  usage: 2,
  /** The environment failed: ledger locked or read-only, disk full, I/O error. */
  failure: 3,
  /** A one-shot drain stopped by a signal before inbox/ was empty: what it took is finished, the rest waits. */
  interrupted: 4,
} as const

/** The exit code a SpoolError should end a command with. */
export function exitCodeFor(error: SpoolError): number {
  switch (error.code) {
    case "usage":
    case "not-a-queue":
    case "cross-device":
    case "unsafe-ledger":
      return ExitCode.usage
    case "refused":
      return ExitCode.check
    case "ledger":
    case "io":
      return ExitCode.failure
  }
}

/** The errno code of a Node-style filesystem error, or undefined. */
export function errnoOf(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined
}
