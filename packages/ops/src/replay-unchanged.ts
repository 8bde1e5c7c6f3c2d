// A format error is in the bytes: replaying the bytes that failed fails the same way, so replay
// refuses a format error's file that is unchanged since it failed (--force overrides).
import fs from "node:fs"
import { classOf, type FailureRecord } from "@spool/core/engine"

/**
 * Why `path` (a file in error/) must not be replayed as it is, or undefined when it may: its
 * latest failure is of the format class and its bytes are still the ones that failed. With a
 * recorded hash, unchanged means the same sha256. A failure recorded without one (too-large,
 * not-regular, symlink: the consumer never read the file) counts as unchanged unless the file
 * was written after the failure (its mtime is later than the failure's time), as an operator's
 * fix writes it; replay cannot know the consumer's --max-bytes to judge a size.
 */
export function unchangedRefusal(path: string, failure: FailureRecord | undefined): string | undefined {
  if (failure === undefined || classOf(failure.reason) !== "format") return undefined
  const isUnchanged =
    failure.payloadHash !== null
      ? Bun.CryptoHasher.hash("sha256", fs.readFileSync(path), "hex") === failure.payloadHash
      : fs.statSync(path).mtimeMs <= Date.parse(failure.failedAt)
  if (!isUnchanged) return undefined
  const since = failure.payloadHash !== null ? "its bytes are the ones that failed" : "it was not written since"
  return (
    `it failed with ${failure.reason}, a format error, and ${since}, so it would fail again; ` +
    "fix the file in error/ first, or pass --force to replay it as it is"
  )
}
