// A replay to the broker a failed delivery came from: its bytes are published back to its
// origin, and the file leaves error/ only once the broker has confirmed them.
import fs from "node:fs"
import { join } from "node:path"
import {
  errnoOf,
  type FailureOrigin,
  type LedgerPort,
  openSource,
  type Queue,
  quoteName,
  replayHeader,
  type SourcePort,
  SpoolError,
} from "@spool/core/engine"
import { type MoveOutcome, type RepeatPolicy, readUnchanged, refusal } from "./replay-move.ts"
import { tooOftenRepeat } from "./replay-unchanged.ts"

/** Where a replay sends the files a broker delivered: back to their origin, or into the root's inbox/. */
export type ReplayTarget = "origin" | "inbox"

/** The broker of `--source`, opened at first need and closed once by whoever made it. */
export interface SourceHandle {
  /** The URL as given (undefined: no --source), for the refusal that says what to pass. */
  readonly url: string | undefined
  open(): Promise<SourcePort>
  close(): Promise<void>
}

/** A handle on `url` (undefined: none given); nothing connects until a file needs it. */
export function sourceHandle(url: string | undefined): SourceHandle {
  let opened: Promise<SourcePort> | undefined
  return {
    url,
    open() {
      if (url === undefined) throw new Error("sourceHandle: no --source to open")
      opened ??= openSource(url, { name: "spool-replay" })
      return opened
    },
    async close() {
      const source = await opened?.catch(() => undefined)
      await source?.close()
    },
  }
}

/**
 * Why `origin` cannot be published to with `--source` (its URL as given), or undefined. The
 * ledger keeps the URL without its password, so the operator gives it again, and it must be the
 * one the message came from: a replay never publishes anywhere else.
 */
export function sourceRefusal(origin: FailureOrigin, given: SourcePort | undefined): string | undefined {
  const from = origin.origin.source
  if (given === undefined)
    return (
      `a broker delivered it (${from}, ${origin.origin.address}): give --source ${quoteUrl(withPasswordSlot(from))} ` +
      "(that URL with its password) to publish it back there, or --to inbox to consume it from the root"
    )
  if (given.describe !== from)
    return `it came from ${from}, not from --source ${given.describe}; replay it with --source for ${from}, or --to inbox`
  return undefined
}

function withPasswordSlot(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^/@:]+)@/i, "$1$2:PASSWORD@")
}

function quoteUrl(url: string): string {
  return `'${url.replaceAll("'", "'\\''")}'`
}

/**
 * Publishes `error/FILE` to its origin and, once the broker confirmed it, marks the replay and
 * removes the file in one ledger transaction. The message carries `replayHeader` (the failure's
 * claim id), which gives it an identity of its own at the source: a crash after the confirm and
 * before the removal leaves the file in error/ with its failure unmarked, and replaying it again
 * publishes the same message a second time, which the consumer recognises as the first and
 * acknowledges without processing it again. A file that would fail the same way is decided
 * before anything is published (see `RepeatPolicy`).
 */
export async function publishAndMark(
  queue: Queue,
  ledger: LedgerPort,
  source: SourcePort,
  file: string,
  origin: FailureOrigin,
  now: Date,
  policy: RepeatPolicy,
): Promise<MoveOutcome> {
  const failure = await ledger.unreplayedFailure(file)
  const repeat =
    tooOftenRepeat(await ledger.replayCount(file), policy.maxReplays) ?? readUnchanged(queue, file, failure)
  if (repeat !== undefined && !policy.isTakingRepeats) return { kind: "skipped", repeat }
  const path = join(queue.error, file)
  const body = readBody(path, file)
  const headers = { ...origin.origin.headers, [replayHeader]: origin.claimId }
  try {
    await source.publish({ ...origin.origin, headers }, body)
  } catch (error) {
    throw refusal(file, `${origin.origin.source} did not confirm it: ${messageOf(error)}; it stays in error/`)
  }
  const r = await ledger.recordReplay(file, now.toISOString(), () => removeReplayed(path, file))
  if (r.kind === "too-often") throw new Error("publishAndMark: a replay without a limit was refused")
  const to = `${origin.origin.source} (${origin.origin.address})`
  return { kind: "moved", replayed: { file, reason: failure?.reason, isRecordMarked: r.isRecordMarked, repeat, to } }
}

function readBody(path: string, file: string): Uint8Array {
  try {
    return fs.readFileSync(path)
  } catch (error) {
    if (errnoOf(error) === "ENOENT") throw refusal(file, "it left error/ while replay ran")
    throw new SpoolError("io", `cannot read ${path}: ${String(error)}`, { cause: error })
  }
}

/** The file's removal inside the replay's transaction; one gone meanwhile rolls the mark back. */
function removeReplayed(path: string, file: string): void {
  try {
    fs.unlinkSync(path)
  } catch (error) {
    if (errnoOf(error) === "ENOENT")
      throw new SpoolError(
        "refused",
        `${quoteName(file)} was published back, but it left error/ meanwhile: its replay is not marked, and the published copy is consumed once`,
      )
    throw new SpoolError("io", `cannot remove ${path}: ${String(error)}`, { cause: error })
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
