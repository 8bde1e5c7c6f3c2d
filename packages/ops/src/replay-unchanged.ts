// A file replayed as it is can only fail the same way again: a format error's bytes that are
// unchanged since they failed, or a message already replayed --max-replays times. A named file
// is replayed anyway with a warning; a selection skips it unless told to take it.
import fs from "node:fs"
import { classOf, type FailureRecord } from "@spool/core/engine"

/** Why a file sent back to inbox/ as it is would fail the same way again. */
export type Repeat =
  | { readonly kind: "unchanged"; readonly reason: string; readonly isHashed: boolean }
  | { readonly kind: "too-often"; readonly count: number; readonly maxReplays: number }

/**
 * The `unchanged` repeat of `path` (a file in error/), or undefined: its latest failure is of the
 * format class and its bytes are still the ones that failed. With a recorded hash, unchanged
 * means the same sha256. A failure recorded without one (too-large, not-regular, symlink: the
 * consumer never read the file) counts as unchanged unless the file was written after the
 * failure (its mtime is later than the failure's time), as an operator's fix writes it; replay
 * cannot know the consumer's --max-bytes to judge a size.
 */
export function unchangedRepeat(path: string, failure: FailureRecord | undefined): Repeat | undefined {
  if (failure === undefined || classOf(failure.reason) !== "format") return undefined
  const isHashed = failure.payloadHash !== null
  const isUnchanged = isHashed
    ? Bun.CryptoHasher.hash("sha256", fs.readFileSync(path), "hex") === failure.payloadHash
    : fs.statSync(path).mtimeMs <= Date.parse(failure.failedAt)
  return isUnchanged ? { kind: "unchanged", reason: failure.reason, isHashed } : undefined
}

/** The `too-often` repeat of a file the ledger has logged `count` replays of, or undefined. */
export function tooOftenRepeat(count: number, maxReplays: number): Repeat | undefined {
  return count >= maxReplays ? { kind: "too-often", count, maxReplays } : undefined
}

/** The warning for a file moved although it repeats: what will happen, and what to do instead. */
export function repeatWarning(repeat: Repeat): string {
  const will =
    repeat.kind === "unchanged"
      ? `it failed with ${repeat.reason}, a format error, and ${repeat.isHashed ? "its bytes are the ones that failed" : "it was not written since"}, so it will fail the same way`
      : `it was already replayed ${times(repeat.count)} (--max-replays ${repeat.maxReplays}), so it will likely fail the same way`
  return `${will}; fix it at the source, or correct it in error/ before replaying it`
}

/** The one line that accounts for the files a selection skipped (none when `repeats` is empty). */
export function skippedLine(repeats: readonly Repeat[], selected: number, isDryRun: boolean): string {
  const unchanged = repeats.filter((r) => r.kind === "unchanged").length
  const tooOften = repeats.filter((r) => r.kind === "too-often")
  const limit = tooOften[0]?.maxReplays
  const whys = [
    unchanged > 0 ? `${unchanged} format error${unchanged === 1 ? "" : "s"} unchanged since failing` : undefined,
    tooOften.length > 0 ? `${tooOften.length} already replayed --max-replays ${limit} times` : undefined,
  ].filter((w) => w !== undefined)
  const of = `${repeats.length} of ${selected} selected file${selected === 1 ? "" : "s"}`
  return (
    `${isDryRun ? "dry run: would skip" : "skipped"} ${of}, which would fail the same way (${whys.join(", ")}): ` +
    "fix them at the source, or correct them in error/ first; --include-unchanged replays them as they are"
  )
}

function times(n: number): string {
  return n === 1 ? "1 time" : `${n} times`
}
