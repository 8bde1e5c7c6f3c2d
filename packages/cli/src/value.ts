import { SpoolError } from "@spool/core/engine"

/** Parses a size such as `1048576`, `512k`, `1m`, `2g` into bytes. */
export function parseBytes(text: string, flag: string): number {
  const m = /^(\d+)([kmg]i?b?)?$/i.exec(text.trim())
  if (!m) throw new SpoolError("usage", `${flag} takes a size such as 1048576, 512k or 1m, not ${JSON.stringify(text)}`)
  const unit = (m[2] ?? "").toLowerCase()[0]
  const mult = unit === "k" ? 1024 : unit === "m" ? 1024 ** 2 : unit === "g" ? 1024 ** 3 : 1
  return Number(m[1]) * mult
}

/** Parses a duration such as `500ms`, `30s`, `5m`, `2h`, `90d` into milliseconds. */
export function parseDuration(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim())
  if (!m)
    throw new SpoolError(
      "usage",
      `${flag} takes a duration such as 500ms, 30s, 5m, 2h or 90d, not ${JSON.stringify(text)}`,
    )
  const mult = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] ?? "s"] ?? 1000
  return Number(m[1]) * mult
}

/** Parses a whole number option within bounds. */
export function parseInteger(text: string, flag: string, min = 0): number {
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(Number(text)) || Number(text) < min)
    throw new SpoolError("usage", `${flag} takes a whole number >= ${min}, not ${JSON.stringify(text)}`)
  return Number(text)
}
