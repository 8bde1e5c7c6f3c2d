import fs from "node:fs"
import { join } from "node:path"
import { type CommandSpec, flag, json, ledger, root, runCommand } from "@spool/cli"
import {
  type ClaimEntry,
  classOf,
  ExitCode,
  type HistoryKeys,
  type LandedOrigin,
  type LedgerHistory,
  type LedgerPort,
  openExistingLedger,
  openQueue,
  type Queue,
  type QueueDir,
  queueDirs,
  quoteName,
  resolveLedgerUrl,
  resolveRoot,
  SpoolError,
} from "@spool/core/engine"
import { bodyOf, formatBody, noBodyLine } from "./show-body.ts"

/** `spool show`'s options and help. */
export const spec = {
  name: "show",
  usage: "bun run show [--root DIR] [--ledger URL] [--json] [--body] [--] FILE|MSG_ID",
  summary: "Everything the ledger knows of one file or one message, in time order.",
  description:
    "For a FILE (a name in one of the queue's directories, or one the ledger recorded): where it is now,\n" +
    "its failures and replays, its claim, and when it was processed or was a duplicate, that msg_id's\n" +
    "history, and for a broker delivery in error/ its origin (what replay --source publishes it back to).\n" +
    "For a MSG_ID: its processed row (file, time, stored result), every duplicate and conflicting\n" +
    "delivery, the failures of files with the same bytes (the ledger knows a failed file by its sha256,\n" +
    "not its msg_id) and their replays, and the claims of the files that delivered it. A name is taken\n" +
    "as a FILE when the directories or the ledger know it as one. Read-only. Exit 1 when neither knows it,\n" +
    "or when --body is asked for and no file of it is left in the queue's directories.",
  arguments: [{ name: "FILE|MSG_ID", help: "a file name (the name itself, not its quoted spelling) or a msg_id" }],
  options: {
    root,
    ledger,
    json: { ...json, help: "one JSON object on stdout: what was found, and the timeline" },
    body: flag(
      "also print the message: the file's bytes (for a MSG_ID, of the file it was processed from, else a delivery); with --json, as body",
    ),
  },
  exitCodes: [0, 1, 2, 3],
  examples: [
    {
      args: "--root /srv/spool/orders evt-broken-0001.json",
      does: "where the file is and what the ledger recorded of it",
    },
    { args: "--root /srv/spool/orders --body evt-broken-0001.json", does: "also print the message itself" },
    { args: "--root /srv/spool/orders m-1001-02", does: "everything known of one msg_id" },
  ],
} satisfies CommandSpec

/** A claim as show prints it. */
export interface ShownClaim {
  readonly file: string
  readonly claimId: string
  readonly state: "claimed" | "committed"
  readonly attempts: number
  /** `host:pid` of its consumer; null when its consumers row is gone. */
  readonly owner: string | null
  readonly ownerId: string | null
  readonly claimedAt: string
}

/** One event of a timeline. */
export interface TimelineEvent {
  readonly at: string
  readonly event: "processed" | "duplicate" | "conflict" | "failed" | "replayed" | "deleted" | "claimed"
  readonly file: string
  readonly msgId?: string
  readonly reason?: string
  readonly class?: string
  readonly detail?: string
  readonly original?: string
  readonly result?: unknown
  readonly owner?: string | null
  readonly attempts?: number
}

/** What show found, as `--json` prints it. */
export interface ShowReport {
  readonly kind: "file" | "message"
  readonly query: string
  /** kind file: the directories that hold an entry of that name now. */
  readonly locations?: QueueDir[]
  /** kind file, a broker delivery failed into error/: where it came from (what `replay` publishes it back to). */
  readonly origin?: LandedOrigin
  /** The msg_ids whose deliveries the history holds. */
  readonly msgIds: string[]
  readonly history: Omit<LedgerHistory, "claims"> & { readonly claims: ShownClaim[] }
  readonly timeline: TimelineEvent[]
}

// A file larger than this is not hashed to find its deliveries (replay --id reads no further).
const maxHashedBytes = 64 * 1024 * 1024

/** `spool show FILE|MSG_ID`: one file's or one message's history. Exit 1 when nothing knows it. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values: v, positionals, quiet }) => {
    const [query, extra] = positionals
    if (query === undefined || query === "" || extra !== undefined)
      throw new SpoolError("usage", "show takes one FILE or MSG_ID")
    const queue = openQueue(resolveRoot(v.root))
    const ledger = await openExistingLedger(queue, {
      url: resolveLedgerUrl(v.ledger),
      readonly: true,
      isLostLedgerRefused: true,
    })
    let report: ShowReport | undefined
    try {
      report = await showOf(queue, ledger, query)
    } finally {
      await ledger?.close()
    }
    if (report === undefined) {
      process.stderr.write(
        `show: no file or msg_id ${quoteName(query)} in ${queue.root}: no entry of that name in ${queueDirs.join("/, ")}/, ` +
          `${ledger === undefined ? "and no ledger yet" : "and no ledger row with that file name or msg_id"}; spool list shows the queue's files\n`,
      )
      return ExitCode.check
    }
    const body = v.body ? bodyOf(queue, report) : undefined
    if (!quiet && v.json) {
      const text = body === undefined ? undefined : new TextDecoder().decode(body.bytes)
      const shown = body === undefined ? report : { ...report, body: { dir: body.dir, file: body.file, text } }
      process.stdout.write(`${JSON.stringify(shown, null, 2)}\n`)
    } else if (!quiet) process.stdout.write(formatReport(report))
    if (!quiet && !v.json && body !== undefined) process.stdout.write(formatBody(body))
    if (v.body && body === undefined) {
      process.stderr.write(noBodyLine(queue, report))
      return ExitCode.check
    }
    return ExitCode.ok
  })
}

/** What the directories and the ledger know of `query`, as a file first, else as a msg_id; undefined when nothing. */
export async function showOf(
  queue: Queue,
  ledger: LedgerPort | undefined,
  query: string,
): Promise<ShowReport | undefined> {
  const locations = locate(queue, query)
  const hash = locations.map((d) => hashOf(join(queue[d], query))).find((h) => h !== undefined)
  const byFile = await historyOf(ledger, { files: [query], payloadHashes: hash === undefined ? [] : [hash] })
  if (locations.length > 0 || !isEmpty(byFile)) {
    const msgIds = idsOf(byFile)
    const history = msgIds.length === 0 ? byFile : merge(byFile, await messageHistory(ledger, msgIds))
    const origin = locations.includes("error") ? (await ledger?.failureOrigin(query))?.origin : undefined
    const report = reportOf("file", query, history, msgIds, locations)
    return origin === undefined ? report : { ...report, origin }
  }
  const byId = await messageHistory(ledger, [query])
  if (isEmpty(byId)) return undefined
  return reportOf("message", query, byId, [query])
}

/**
 * A message's history: its processed and duplicates rows; then, by their payload hashes, the
 * failures of the same bytes (a handler's refusal before a replay processed them, say) and their
 * replays; and the claims of the files that delivered it.
 */
async function messageHistory(ledger: LedgerPort | undefined, msgIds: readonly string[]): Promise<LedgerHistory> {
  const deliveries = await historyOf(ledger, { msgIds })
  const rows = [...deliveries.processed, ...deliveries.duplicates]
  if (rows.length === 0) return deliveries
  const sameBytes = await historyOf(ledger, { payloadHashes: [...new Set(rows.map((r) => r.payloadHash))] })
  const byName = await historyOf(ledger, { files: [...new Set(rows.map((r) => r.file))] })
  const claims = { ...emptyHistory(), claims: byName.claims }
  return merge(merge(deliveries, sameBytes), claims)
}

async function historyOf(ledger: LedgerPort | undefined, keys: HistoryKeys): Promise<LedgerHistory> {
  return ledger === undefined ? emptyHistory() : ledger.history(keys)
}

function emptyHistory(): LedgerHistory {
  return { processed: [], duplicates: [], failures: [], replays: [], claims: [] }
}

function isEmpty(h: LedgerHistory): boolean {
  return Object.values(h).every((rows: unknown[]) => rows.length === 0)
}

/** The msg_ids a history's deliveries carry, in the order first seen. */
function idsOf(h: LedgerHistory): string[] {
  return [...new Set([...h.processed, ...h.duplicates].map((r) => r.msgId))]
}

/** Both histories' rows, each row once, in the order written. */
function merge(a: LedgerHistory, b: LedgerHistory): LedgerHistory {
  const union = <T>(x: readonly T[], y: readonly T[], key: (r: T) => string | number): T[] => {
    const seen = new Map<string | number, T>()
    for (const r of [...x, ...y]) if (!seen.has(key(r))) seen.set(key(r), r)
    return [...seen.values()]
  }
  return {
    processed: union(a.processed, b.processed, (r) => r.msgId),
    duplicates: union(a.duplicates, b.duplicates, (r) => r.claimId).sort((x, y) => cmp(x.seenAt, y.seenAt)),
    failures: union(a.failures, b.failures, (r) => r.id).sort((x, y) => x.id - y.id),
    replays: union(a.replays, b.replays, (r) => `${r.file}\0${r.replayedAt}\0${r.failureId}`).sort((x, y) =>
      cmp(x.replayedAt, y.replayedAt),
    ),
    claims: union(a.claims, b.claims, (r) => r.name),
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/** The directories holding an entry named `name`; none for a name that is not a plain file name. */
function locate(queue: Queue, name: string): QueueDir[] {
  // A name no directory can hold (a msg_id of over 255 bytes, asked for by its id) is in none.
  if (name.includes("/") || name === "." || name === ".." || name.includes("\0") || Buffer.byteLength(name) > 255)
    return []
  return queueDirs.filter((d) => fs.lstatSync(join(queue[d], name), { throwIfNoEntry: false }) !== undefined)
}

/** The sha256 of a regular file's bytes, as the consumer records it; undefined for anything else. */
function hashOf(path: string): string | undefined {
  try {
    const st = fs.lstatSync(path)
    if (!st.isFile() || st.size > maxHashedBytes) return undefined
    return Bun.CryptoHasher.hash("sha256", fs.readFileSync(path), "hex")
  } catch {
    return undefined
  }
}

function reportOf(
  kind: ShowReport["kind"],
  query: string,
  h: LedgerHistory,
  msgIds: string[],
  locations?: QueueDir[],
): ShowReport {
  const claims = h.claims.map(shownClaim)
  return {
    kind,
    query,
    ...(locations !== undefined && { locations }),
    msgIds,
    // A processed row without a stored result says so (null) rather than dropping the field.
    history: { ...h, processed: h.processed.map((p) => ({ ...p, result: p.result ?? null })), claims },
    timeline: timelineOf(h, claims),
  }
}

function shownClaim(c: ClaimEntry): ShownClaim {
  return {
    file: c.name,
    claimId: c.claimId,
    state: c.state,
    attempts: c.attempts,
    owner: c.owner === undefined ? null : `${c.owner.host}:${c.owner.pid}`,
    ownerId: c.ownerId,
    claimedAt: c.claimedAt,
  }
}

/** Every row of a history as one event, oldest first. */
export function timelineOf(h: LedgerHistory, claims: readonly ShownClaim[]): TimelineEvent[] {
  const events: TimelineEvent[] = [
    ...h.processed.map(
      (p): TimelineEvent => ({
        at: p.processedAt,
        event: "processed",
        file: p.file,
        msgId: p.msgId,
        ...(p.result !== undefined && { result: p.result }),
      }),
    ),
    ...h.duplicates.map(
      (d): TimelineEvent => ({
        at: d.seenAt,
        event: d.isConflict ? "conflict" : "duplicate",
        file: d.file,
        msgId: d.msgId,
      }),
    ),
    ...h.failures.map(
      (f): TimelineEvent => ({
        at: f.failedAt,
        event: "failed",
        file: f.file,
        reason: f.reason,
        class: classOf(f.reason),
        detail: f.detail,
        ...(f.original !== f.file && { original: f.original }),
      }),
    ),
    ...h.replays.map((r): TimelineEvent => ({ at: r.replayedAt, event: "replayed", file: r.file })),
    ...h.failures.flatMap((f): TimelineEvent[] =>
      f.deletedAt === null ? [] : [{ at: f.deletedAt, event: "deleted", file: f.file }],
    ),
    ...claims.map(
      (c): TimelineEvent => ({
        at: c.claimedAt,
        event: "claimed",
        file: c.file,
        owner: c.owner,
        attempts: c.attempts,
      }),
    ),
  ]
  // Stable: events of one instant keep the order above (a delivery before what followed it).
  return events.sort((a, b) => cmp(a.at, b.at))
}

/** The text of `spool show`: what was asked and where it is, then one line per event. */
export function formatReport(r: ShowReport): string {
  const head =
    r.kind === "file"
      ? `file ${quoteName(r.query)}: ${
          r.locations === undefined || r.locations.length === 0
            ? "in none of the queue's directories"
            : `in ${r.locations.map((d) => `${d}/`).join(" and ")}`
        }${r.msgIds.length === 0 ? "" : `; msg_id ${r.msgIds.map(quoteName).join(", ")}`}`
      : `msg_id ${quoteName(r.query)}: ${r.history.processed.length === 0 ? "no processed row in this root (processed by another root sharing the ledger, or pruned by compact)" : `processed from ${quoteName(r.history.processed[0]?.file ?? "")}`}`
  const from =
    r.origin === undefined
      ? []
      : [
          `origin ${r.origin.source} ${quoteName(r.origin.address)}${r.origin.messageId === undefined ? "" : ` message-id ${quoteName(r.origin.messageId)}`}`,
        ]
  const width = Math.max(0, ...r.timeline.map((e) => e.event.length))
  const lines = r.timeline.map((e) => `${e.at}  ${e.event.padEnd(width)}  ${quoteName(e.file)}${factsOf(e)}`)
  return `${[head, ...from, ...(lines.length === 0 ? ["(no ledger rows)"] : lines)].join("\n")}\n`
}

function factsOf(e: TimelineEvent): string {
  const facts: string[] = []
  if (e.original !== undefined) facts.push(`from=${quoteName(e.original)}`)
  if (e.msgId !== undefined) facts.push(`msg_id=${quoteName(e.msgId)}`)
  if (e.reason !== undefined) facts.push(`reason=${e.reason} class=${e.class}`)
  if (e.owner !== undefined) facts.push(`owner=${e.owner === null ? "gone" : quoteName(e.owner)}`)
  if (e.attempts !== undefined) facts.push(`attempts=${e.attempts}`)
  if (e.result !== undefined) facts.push(`result=${JSON.stringify(e.result)}`)
  if (e.detail !== undefined) facts.push(`detail=${JSON.stringify(e.detail)}`)
  return facts.length === 0 ? "" : `  ${facts.join(" ")}`
}
