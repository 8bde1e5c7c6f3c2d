// Threshold ranges as the Nagios plugin guidelines define them
// (https://nagios-plugins.org/doc/guidelines.html#THRESHOLDFORMAT): `10` alerts outside 0..10,
// `10:` below 10, `~:10` above 10, `10:20` outside 10..20, `@10:20` inside 10..20.
import { SpoolError } from "@spool/core/engine"

/** A parsed threshold range, with the text it was given as (perfdata repeats it). */
export interface NagiosRange {
  readonly text: string
  readonly start: number
  readonly end: number
  /** `@`: alert when the value is inside start..end rather than outside. */
  readonly isInside: boolean
}

const bound = /^-?\d+(\.\d+)?$/

/** Parses a range given to `option`; a text that is not one is a usage error naming the forms. */
export function parseRange(option: string, text: string): NagiosRange {
  const isInside = text.startsWith("@")
  const body = isInside ? text.slice(1) : text
  const colon = body.indexOf(":")
  const startText = colon < 0 ? "0" : body.slice(0, colon)
  const endText = colon < 0 ? body : body.slice(colon + 1)
  const start = startText === "~" ? Number.NEGATIVE_INFINITY : bound.test(startText) ? Number(startText) : Number.NaN
  const end = endText === "" ? Number.POSITIVE_INFINITY : bound.test(endText) ? Number(endText) : Number.NaN
  if (Number.isNaN(start) || Number.isNaN(end) || start > end || (colon < 0 && body === ""))
    throw new SpoolError(
      "usage",
      `--${option} takes a Nagios range (10, 10:, ~:10, 10:20 or @10:20), not ${JSON.stringify(text)}`,
    )
  return { text, start, end, isInside }
}

/** Whether `value` raises the alert this range defines. */
export function isAlert(range: NagiosRange, value: number): boolean {
  const within = value >= range.start && value <= range.end
  return range.isInside ? within : !within
}

/** The reason a value alerts: `inbox=11 is over the warning threshold 10`, `error=15 is inside the critical range @10:20`. */
export function alertPhrase(label: string, value: number, level: "warning" | "critical", range: NagiosRange): string {
  const at = `${label}=${value} is`
  if (range.isInside) return `${at} inside the ${level} range ${range.text}`
  const isPlain = range.start === 0 || range.start === Number.NEGATIVE_INFINITY
  if (value > range.end && isPlain) return `${at} over the ${level} threshold ${range.end}`
  if (value < range.start && range.end === Number.POSITIVE_INFINITY)
    return `${at} below the ${level} threshold ${range.start}`
  return `${at} outside the ${level} range ${range.text}`
}
