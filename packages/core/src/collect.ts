// Forced full garbage collections, in proportion to the work done, for a process that wants a
// small footprint. JavaScriptCore lets garbage grow with the machine's RAM before it collects
// (tens of MB on a machine with 24 GB), so left alone a consume run's peak RSS is set by garbage,
// not by live data. Off until `collectGarbageEvery` is called: the consume command, which owns its
// process, turns it on; an application that embeds spool keeps its own collector's policy.

let every = 0
let since = 0

/**
 * Collects garbage on this thread after every `files` files' worth of work (0 turns it off).
 * Each thread has its own heap and its own setting.
 */
export function collectGarbageEvery(files: number): void {
  every = files
  since = 0
}

/** Counts work, in files' worth, and runs a full collection when `collectGarbageEvery` is due. */
export function workDone(files: number): void {
  if (every <= 0) return
  since += files
  if (since >= every) {
    since = 0
    Bun.gc(true)
  }
}

/**
 * What one report row counts for in `workDone`: a row is a few short strings, against a
 * consumed file's text, parsed message, hashes and ledger parameters.
 */
export const reportRow = 1 / 10
