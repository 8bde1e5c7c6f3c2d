// Forced garbage collections, in proportion to the work done, for a process that wants a small
// footprint. JavaScriptCore lets garbage grow with the machine's RAM before it collects (tens of
// MB on a machine with 24 GB), so left alone a consume run's peak RSS is set by garbage, not by
// live data. Off until `collectGarbageEvery` is called: the consume command, which owns its
// process, turns it on; an application that embeds spool keeps its own collector's policy.
//
// Two kinds: a young-generation (eden) collection is cheap, as it visits only what was
// allocated since the last one, but what a batch keeps alive across it (its items live from
// claim to move-out) is promoted, and only a full collection, which walks the whole heap,
// frees that. Mostly eden and a full one now and then holds the same peak for less time.

let edenEvery = 0
let fullEvery = 0
let sinceEden = 0
let sinceFull = 0

/**
 * Collects garbage on this thread: a young-generation collection after every `files` files'
 * worth of work, and a full one instead once `fullFiles` have accumulated since the last full
 * one (default `files`: full collections only). 0 turns it off. Each thread has its own heap
 * and its own setting.
 */
export function collectGarbageEvery(files: number, fullFiles = files): void {
  edenEvery = files
  fullEvery = Math.max(files, fullFiles)
  sinceEden = 0
  sinceFull = 0
}

/** Counts work, in files' worth, and runs the collection `collectGarbageEvery` makes due. */
export function workDone(files: number): void {
  if (edenEvery <= 0) return
  sinceEden += files
  sinceFull += files
  if (sinceEden < edenEvery) return
  sinceEden = 0
  const isFull = sinceFull >= fullEvery
  if (isFull) sinceFull = 0
  Bun.gc(isFull)
}

/**
 * What one report row counts for in `workDone`: a row is a few short strings, against a
 * consumed file's text, parsed message, hashes and ledger parameters.
 */
export const reportRow = 1 / 10
