// Decoding a message file: strict UTF-8, JSON with an object at the top, ids a ledger can store,
// numbers as written; and the canonical text of its content, whose hash decides conflicts.
// Nothing here imports a schema library: the default rules are rules.ts, an
// application's arktype type is applied by validate.ts.

import { isStorableText } from "../ledger/storable-text.ts"
import type { Reason } from "./reasons.ts"

/** A message's required fields, as messageSchema checks them. */
export interface Message {
  msg_id: string
  order_no: string
  seq: number
  amount: number
}

/** The names of the required fields, in the order reports list them. */
export const requiredFields = ["msg_id", "order_no", "seq", "amount"] as const

/** Why the consumer rejects a file before the ledger sees a message (reasons.ts has them all, with their classes). */
export type RejectReason = Exclude<Reason, "expired">

/** A message that passed validation, with what the ledger needs to record it. */
export interface Accepted<T> {
  readonly ok: true
  readonly message: T
  /** The value parsed from the file (all fields). */
  readonly value: Record<string, unknown>
  /** The JSON text, used to recover the exact decimal spelling of numbers. */
  readonly text: string
  /** The source spelling of the top-level `amount`, when it is a number: `0.10` stays `0.10`. */
  readonly amountText: string | undefined
}

/** A message that cannot be processed, with the reason and a human-readable detail. */
export interface Rejected {
  readonly ok: false
  readonly reason: RejectReason
  readonly detail: string
}

export type Decoded<T> = Accepted<T> | Rejected

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false })

/** What a validator says of a parsed JSON object: the message it is, or why it is not one. */
export type Checked<T> = { readonly ok: true; readonly message: T } | Rejected

/** What a parse error of a file that stops before its JSON does adds: the usual cause, and its cure. */
const stillWriting =
  " (the file ends before its JSON does: was its producer still writing it? Producers should write elsewhere and rename each file into inbox/ whole, or run consume with --min-age)"

/** Whether JSON.parse failed at the end of `text`, and the text does not close an object: cut short. */
function endsEarly(text: string, detail: string): boolean {
  return /Unexpected EOF|Unterminated|Expected '[}\]]'/.test(detail) && !text.trimEnd().endsWith("}")
}

/**
 * Decodes one message file's bytes and validates the object with `check`: checkMessage
 * (rules.ts), or an arktype type through validate.ts's decodeMessage. A UTF-8 byte
 * order mark is accepted and dropped (Windows producers write one); anything else that is not
 * strict UTF-8 JSON text whose top level is an object is `parse`. Whatever `check` accepts,
 * the ids must be storable as ledger keys and `seq` must be whole as written.
 */
export function decodeWith<T extends object>(
  bytes: Uint8Array,
  check: (record: Record<string, unknown>) => Checked<T>,
): Decoded<T> {
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    return { ok: false, reason: "parse", detail: "not valid UTF-8" }
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error)
    return { ok: false, reason: "parse", detail: endsEarly(text, detail) ? `${detail}${stillWriting}` : detail }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    const kind = value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`
    return { ok: false, reason: "parse", detail: `top-level JSON value is ${kind}, not an object` }
  }
  const record = value as Record<string, unknown>
  const checked = check(record)
  if (!checked.ok) return withNumbersAsWritten(checked, record, text)
  const out = checked.message
  // An application's own type may let any string be an id. Written as escapes an id could equal
  // another one, and stored as is it aborts a PostgreSQL commit: whatever the type, it is invalid.
  const keyProblem = unstorableKey(out as Partial<Message>)
  if (keyProblem !== undefined) return { ok: false, reason: "invalid-field", detail: keyProblem }
  // JSON.parse rounds: `2.0000000000000001` would pass as the integer 2. Judge the digits.
  const raw = rawNumberFields(text, numberFields)
  const seqText = typeof record.seq === "number" ? raw.seq : undefined
  if (seqText !== undefined && !isWholeNumberText(seqText))
    return { ok: false, reason: "invalid-field", detail: `seq must be a whole number (was ${seqText})` }
  return { ok: true, message: out as T, value: record, text, amountText: raw.amount }
}

const numberFields = ["seq", "amount"] as const

/**
 * A rejection whose detail says each number field as the file wrote it: JSON.parse rounds
 * `12345678901234567891` to the nearest double, which the detail would print as
 * `12345678901234567000`, and `1e400` to Infinity. Only a part about that field (the parts are
 * joined by "; ", each starting with its field's name) is changed.
 */
function withNumbersAsWritten(failed: Rejected, record: Record<string, unknown>, text: string): Rejected {
  const fields = numberFields.filter((f) => typeof record[f] === "number")
  if (fields.length === 0) return failed
  const raw = rawNumberFields(text, fields)
  const detail = failed.detail
    .split("; ")
    .map((part) => {
      for (const f of fields) {
        const parsed = String(record[f])
        const written = raw[f]
        if (written === undefined || written === parsed || !part.startsWith(`${f} `)) continue
        const said = written.length > 64 ? `${written.slice(0, 60)}... (${written.length} characters)` : written
        return part.replace(`(was ${parsed})`, `(was ${said})`).replace(`${f} (${parsed})`, `${f} (${said})`)
      }
      return part
    })
    .join("; ")
  return detail === failed.detail ? failed : { ...failed, detail }
}

/**
 * The most bytes (UTF-8) a msg_id or order_no may have. Each is a key of a B-tree index on
 * both ledgers, and a PostgreSQL index entry holds at most 2,704 bytes: a longer key would
 * abort every commit of its batch, and the batch would never leave processing/. 1,024 leaves
 * room for compressed and composite entries, and is far beyond any id a producer makes.
 */
export const maxKeyBytes = 1024

/** Why a validated message's msg_id or order_no cannot be a ledger key, or undefined when both can. */
function unstorableKey(m: Partial<Message>): string | undefined {
  for (const field of ["msg_id", "order_no"] as const) {
    const value = m[field]
    if (typeof value !== "string") continue
    if (!isStorableText(value)) return unstorable(field, value)
    // A UTF-16 unit is at most 3 bytes in UTF-8 (a pair of them 4), so a short key is counted only when it could be too long.
    const bytes = value.length * 3 > maxKeyBytes ? Buffer.byteLength(value, "utf8") : 0
    if (bytes > maxKeyBytes)
      return `${field} must be at most ${maxKeyBytes} bytes in UTF-8 to be a ledger key (was ${bytes} bytes: ${JSON.stringify(value.slice(0, 40))}...)`
  }
  return undefined
}

// JSON.stringify writes U+0000 and lone surrogates as escapes, so the detail itself is storable.
const unstorable = (field: string, value: string): string =>
  `${field} must be well-formed Unicode without U+0000, or no ledger can store it as a key (was ${JSON.stringify(value)})`

/** True when a JSON number's exact decimal value is whole: `3`, `3.0`, `3e2`, `300e-2`. */
function isWholeNumberText(s: string): boolean {
  const m = /^-?(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(s)
  if (!m) return false
  const whole = m[1] ?? ""
  const digits = whole + (m[2] ?? "")
  const point = whole.length + Number(m[3] ?? 0)
  return /^0*$/.test(digits.slice(Math.max(0, point)))
}

/**
 * The exact source spelling of a top-level number field (the last one, as JSON.parse keeps
 * the last of duplicate keys), so money is stored as written: `0.1` stays `0.1`.
 * `text` must already be known to be valid JSON with an object at the top.
 */
export function rawNumberField(text: string, field: string): string | undefined {
  return rawNumberFields(text, [field])[field]
}

/** rawNumberField for several fields in one scan of the text. */
function rawNumberFields<K extends string>(text: string, fields: readonly K[]): Partial<Record<K, string>> {
  let i = text.indexOf("{") + 1
  const found: Partial<Record<K, string>> = {}
  const n = text.length
  while (i < n) {
    i = skipSpace(text, i)
    const c = text.charCodeAt(i)
    if (c === 0x7d /* } */) break
    if (c === 0x2c /* , */) {
      i++
      continue
    }
    // key
    const keyEnd = endOfString(text, i)
    const rawKey = text.slice(i, keyEnd)
    const key = rawKey.includes("\\") ? (JSON.parse(rawKey) as string) : rawKey.slice(1, -1)
    i = skipSpace(text, keyEnd) + 1 // past ':'
    i = skipSpace(text, i)
    const valueEnd = endOfValue(text, i)
    if ((fields as readonly string[]).includes(key)) found[key as K] = text.slice(i, valueEnd)
    i = valueEnd
  }
  return found
}

function skipSpace(s: string, i: number): number {
  while (i < s.length) {
    const c = s.charCodeAt(i)
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i
    i++
  }
  return i
}

/** Index just past the closing quote of the string starting at `i`. */
function endOfString(s: string, i: number): number {
  let j = i + 1
  for (;;) {
    const q = s.indexOf('"', j)
    if (q < 0) return s.length
    let backslashes = 0
    for (let k = q - 1; s.charCodeAt(k) === 0x5c; k--) backslashes++
    if (backslashes % 2 === 0) return q + 1
    j = q + 1
  }
}

/** Index just past the JSON value starting at `i`; iterative, so any nesting depth is fine. */
function endOfValue(s: string, i: number): number {
  const c = s.charCodeAt(i)
  if (c === 0x22) return endOfString(s, i)
  if (c === 0x7b || c === 0x5b) {
    let depth = 0
    let j = i
    while (j < s.length) {
      const d = s.charCodeAt(j)
      if (d === 0x22) {
        j = endOfString(s, j)
        continue
      }
      if (d === 0x7b || d === 0x5b) depth++
      else if (d === 0x7d || d === 0x5d) {
        depth--
        if (depth === 0) return j + 1
      }
      j++
    }
    return j
  }
  let j = i
  while (j < s.length) {
    const d = s.charCodeAt(j)
    if (d === 0x2c || d === 0x7d || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) break
    j++
  }
  return j
}

/**
 * The canonical text of a decoded message's content, what its content hash is taken of, with
 * numbers compared by their written decimal value: `1.0`, `1.00` and `1` are the same content,
 * `12345678901234567.88` and `12345678901234567.89` are not (as doubles they are one number).
 * `text` is the JSON the value was parsed from.
 */
export function canonicalContent(value: Record<string, unknown>, text: string): string {
  // A number with at most 15 significant digits and no exponent survives JSON.parse exactly,
  // so a text with no other is written from the parsed value, by the fast path. A longer run
  // of digits (in a string too) takes the exact path, which writes the same text for every
  // number a double holds exactly.
  if (!mayRoundNumbers.test(text)) return canonicalJson(value)
  return canonicalJson(JSON.parse(text, exactNumbers))
}

const mayRoundNumbers = /\d[\d.]{15}|\d[eE]/

/** A number whose double is not its written value: written by that value, `<digits>e<exponent>`. */
class ExactNumber {
  readonly text: string
  constructor(text: string) {
    this.text = text
  }
  toJSON(): string {
    return this.text
  }
}

function exactNumbers(this: unknown, _key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value !== "number" || context?.source === undefined) return value
  const written = decimalValue(context.source)
  return written === decimalValue(String(value)) ? value : new ExactNumber(written ?? context.source)
}

/** The exact value of a JSON number literal, spelled one way: `-1234e-2` for `-12.340`; `0` for any zero. */
export function decimalValue(literal: string): string | undefined {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(literal)
  if (!m) return undefined
  const fraction = m[3] ?? ""
  let digits = ((m[2] ?? "") + fraction).replace(/^0+/, "")
  if (digits === "") return "0"
  const trimmed = digits.replace(/0+$/, "")
  const exponent = BigInt(m[4] ?? "0") - BigInt(fraction.length) + BigInt(digits.length - trimmed.length)
  digits = trimmed
  return `${m[1]}${digits}e${exponent}`
}

/**
 * JSON with object keys sorted at every level: two files that say the same thing, whatever
 * their whitespace or key order, have the same canonical text (conflict detection uses it).
 * Iterative, so hostile nesting depth cannot overflow the stack.
 */
export function canonicalJson(value: unknown): string {
  // The usual message, an object of plain values: one JSON.stringify writes exactly what the
  // general walk below would, several times faster. Of an object built in sorted key order,
  // unless a key is integer-like: every object lists those first, in numeric order, so then
  // the sorted keys go in as JSON.stringify's allow-list, which keeps its order.
  if (isFlatObject(value)) {
    const keys = Object.keys(value).sort()
    if (keys.some(startsWithDigit)) return JSON.stringify(value, keys)
    const sorted: Record<string, unknown> = Object.create(null)
    for (const k of keys) sorted[k] = value[k]
    return JSON.stringify(sorted)
  }
  let out = ""
  // Work items: a value still to write, or literal punctuation already decided.
  const stack: ({ readonly value: unknown } | { readonly text: string })[] = [{ value }]
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    if ("text" in item) {
      out += item.text
      continue
    }
    const v = item.value
    if (v instanceof ExactNumber) {
      out += v.text
      continue
    }
    if (v === null || typeof v !== "object") {
      out += JSON.stringify(v) ?? "null"
      continue
    }
    if (Array.isArray(v)) {
      out += "["
      stack.push({ text: "]" })
      for (let i = v.length - 1; i >= 0; i--) {
        stack.push({ value: v[i] })
        if (i > 0) stack.push({ text: "," })
      }
      continue
    }
    out += "{"
    stack.push({ text: "}" })
    const keys = Object.keys(v).sort()
    for (let i = keys.length - 1; i >= 0; i--) {
      const k = keys[i] as string
      stack.push({ value: (v as Record<string, unknown>)[k] })
      stack.push({ text: `${i > 0 ? "," : ""}${JSON.stringify(k)}:` })
    }
  }
  return out
}

const startsWithDigit = (k: string): boolean => k.charCodeAt(0) >= 0x30 && k.charCodeAt(0) <= 0x39

function isFlatObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false
  for (const k in v) {
    const x = (v as Record<string, unknown>)[k]
    if (typeof x === "object" && x !== null) return false
  }
  return true
}
