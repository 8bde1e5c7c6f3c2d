import { SpoolError } from "@spool/core/engine"

/** Parses a size such as `1048576`, `512k`, `1m`, `2g` into bytes. */
export function parseBytes(text: string, flag: string): number {
  const m = /^(\d+)([kmg]i?b?)?$/i.exec(text.trim())
  if (!m) throw new SpoolError("usage", `${flag} takes a size such as 1048576, 512k or 1m, not ${JSON.stringify(text)}`)
  const unit = (m[2] ?? "").toLowerCase()[0]
  const mult = unit === "k" ? 1024 : unit === "m" ? 1024 ** 2 : unit === "g" ? 1024 ** 3 : 1
  return Number(m[1]) * mult
}

const durationUnits = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const

/** The longest duration an option takes: 100 years. */
const maxDurationMs = 36_500 * durationUnits.d

/**
 * Parses a duration such as `500ms`, `30s`, `5m`, `2h`, `90d` into milliseconds. The unit is
 * required: a bare number is refused, since no one unit is what every reader means by it
 * (`compact --older-than 90` meant 90 seconds, and archived nearly everything).
 */
export function parseDuration(text: string, flag: string, example = "30s"): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim())
  if (m?.[1] !== undefined && m[2] !== undefined) {
    const ms = Number(m[1]) * durationUnits[m[2] as keyof typeof durationUnits]
    // A time this far from now is one no clock or ledger can write (a Date ends 273,790 years out).
    if (ms > maxDurationMs)
      throw new SpoolError(
        "usage",
        `${flag} takes a duration of at most 36500d (100 years), not ${JSON.stringify(text)}`,
      )
    return ms
  }
  const needs = `${flag} takes a duration with a unit (ms, s, m, h, d), such as ${example}`
  throw new SpoolError(
    "usage",
    /^\d+(\.\d+)?$/.test(text.trim())
      ? `${needs}; ${JSON.stringify(text)} has none`
      : `${needs}, not ${JSON.stringify(text)}`,
  )
}

/** Parses a whole number option within bounds. */
export function parseInteger(text: string, flag: string, min = 0): number {
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(Number(text)) || Number(text) < min)
    throw new SpoolError("usage", `${flag} takes a whole number >= ${min}, not ${JSON.stringify(text)}`)
  return Number(text)
}
