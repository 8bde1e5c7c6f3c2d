// How list prints: a line per entry and a totals line, one JSON array, or nothing at all (-q).
import { type QueueDir, quoteName } from "@spool/core/engine"
import type { ListEntry } from "./list.ts"

/** Where list's entries go, a chunk at a time, then the end. */
export interface Writer {
  readonly write: (entries: readonly ListEntry[]) => Promise<void>
  readonly end: () => Promise<void>
}

/** Nothing at all: `-q`, where the exit code is the answer. */
export const silentWriter: Writer = { write: async () => {}, end: async () => {} }

/** One line per entry. */
export function textWriter(): Writer {
  return {
    write: async (entries) => {
      if (entries.length > 0) await Bun.write(Bun.stdout, `${entries.map(formatEntry).join("\n")}\n`)
    },
    end: async () => {},
  }
}

/** One JSON array, an entry per line, written as the directories are read. */
export function jsonWriter(): Writer {
  let isFirst = true
  return {
    write: async (entries) => {
      if (entries.length === 0) return
      const text = entries.map((e) => JSON.stringify(e)).join(",\n")
      await Bun.write(Bun.stdout, `${isFirst ? "[\n" : ",\n"}${text}`)
      isFirst = false
    },
    end: () => Bun.write(Bun.stdout, isFirst ? "[]\n" : "\n]\n").then(() => {}),
  }
}

/** The text line of one entry: directory, age, size, name, then the ledger's facts as key=value. */
export function formatEntry(e: ListEntry): string {
  const facts: string[] = []
  if (e.type !== "file") facts.push(`type=${e.type}`)
  if (e.claim !== undefined)
    facts.push(
      e.claim === null
        ? "claim=none"
        : `owner=${e.claim.owner === null ? "gone" : quoteName(e.claim.owner)} attempts=${e.claim.attempts}${e.claim.state === "committed" ? " committed" : ""}`,
    )
  if (e.failure !== undefined)
    facts.push(e.failure === null ? "reason=unknown" : `reason=${e.failure.reason} class=${e.failure.class}`)
  if (e.deferral !== undefined)
    facts.push(
      e.deferral === null ? "deferral=none" : `attempts=${e.deferral.attempts} next=${e.deferral.nextAttemptAt}`,
    )
  const line = `${e.dir.padEnd(10)} ${formatAge(e.ageSeconds).padStart(4)} ${String(e.size).padStart(9)}  ${e.shellName ?? quoteName(e.name)}`
  return facts.length === 0 ? line : `${line}  ${facts.join(" ")}`
}

/**
 * The last line of the text listing, as postqueue's `-- 4 Kbytes in 2 Requests.`, said on an
 * empty queue too: `-- 3 files, 1534 bytes (inbox 2, processing 0, error 1, deferred 0)`.
 */
export function formatTotals(totals: ReadonlyMap<QueueDir, { files: number; bytes: number }>, unlisted = 0): string {
  let files = 0
  let bytes = 0
  for (const t of totals.values()) {
    files += t.files
    bytes += t.bytes
  }
  const each = [...totals].map(([d, t]) => `${d} ${t.files}`).join(", ")
  const more = unlisted > 0 ? `; ${unlisted} more not listed (--limit)` : ""
  return `-- ${files} file${files === 1 ? "" : "s"}, ${bytes} bytes (${each})${more}\n`
}

/** An age in its largest whole unit: `45s`, `12m`, `3h`, `5d`. */
export function formatAge(seconds: number): string {
  if (seconds < 60) return `${seconds}s`
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h`
  return `${Math.floor(seconds / 86400)}d`
}
