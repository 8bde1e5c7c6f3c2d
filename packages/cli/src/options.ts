// The options several commands share, each written once: its kind, value name, help line and
// default. A command takes one as it is, or with its own help line (`{ ...json, help: "..." }`)
// where what it prints differs.
import { flag, type Options, text } from "./option.ts"

/** `--root DIR`: the queue root. */
export const root = text("DIR", "queue root", {
  fallback: "$SPOOL_ROOT, else the enclosing queue root, else ./spool",
})

/** `--ledger URL`: a PostgreSQL ledger instead of the root's SQLite one. */
export const ledger = text("URL", "a postgres:// ledger", {
  fallback: "$SPOOL_LEDGER_URL, else SQLite in ROOT/ledger.db",
})

/** `--json`: machine-readable output. */
export const json = flag("one JSON object on stdout instead of text")

/** `--dry-run`: report, change nothing. */
export const dryRun = flag("say what would change, change nothing")

/** `-q, --quiet`, which every command takes: nothing on success, only what needs a person. */
export const quiet = flag("print nothing on success: only what needs a person (conflicts, refusals, failures)", {
  short: "q",
})

/** `-h, --help`, which every command takes. */
export const help = flag("show this help", { short: "h" })

/** `-V, --version`, which every command takes. */
export const version = flag("print spool's version", { short: "V" })

/** A command's own options, then the ones every command takes; a command may give `quiet` its own help line. */
export function commonOptions(options: Options): Options {
  return { ...options, quiet: options.quiet ?? quiet, help, version }
}
