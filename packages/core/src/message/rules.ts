// spool's message rules (messageSchema in validate.ts) compiled by hand: the check consume runs
// on every message unless the application passes its own type. Same verdicts and same texts as
// the schema node, which rules.test.ts holds it to; change both together.
import type { Checked, Message } from "./decode.ts"

// Well-formed Unicode without control characters: the schema's pattern, character for character.
const idPattern = /^[^\p{Cc}\p{Cs}]*$/u

/**
 * Whether a parsed JSON object is a spool message: msg_id and order_no non-empty well-formed
 * strings without control characters, seq a safe integer >= 1, amount a finite number. A field
 * absent or null is `missing-field` (all of them, in the documented order); otherwise every
 * problem is listed as arktype words it, fields in alphabetical order, joined by "; ".
 */
export function checkMessage(record: Record<string, unknown>): Checked<Message> {
  const { msg_id, order_no, seq, amount } = record
  if (msg_id == null || order_no == null || seq == null || amount == null) return missing(record)
  const a = amountProblem(amount)
  const m = idProblem("msg_id", msg_id)
  const o = idProblem("order_no", order_no)
  const s = seqProblem(seq)
  if (a === undefined && m === undefined && o === undefined && s === undefined)
    return { ok: true, message: record as unknown as Message }
  const detail = [a, m, o, s].filter((p) => p !== undefined).join("; ")
  return { ok: false, reason: "invalid-field", detail: detail.replaceAll("\n", "; ") }
}

const fields = ["msg_id", "order_no", "seq", "amount"] as const

function missing(record: Record<string, unknown>): Checked<Message> {
  const keys = fields.filter((k) => !Object.hasOwn(record, k) || record[k] == null)
  return { ok: false, reason: "missing-field", detail: `missing ${keys.join(", ")}` }
}

function idProblem(field: string, v: unknown): string | undefined {
  if (typeof v !== "string") return `${field} must be a string (was ${domainOf(v)})`
  if (v.length === 0) return `${field} must be non-empty`
  if (!idPattern.test(v))
    return `${field} must be well-formed Unicode without control characters (was ${JSON.stringify(v)})`
  return undefined
}

function seqProblem(v: unknown): string | undefined {
  if (typeof v !== "number") return `seq must be a number (was ${domainOf(v)})`
  const broken: string[] = []
  if (!Number.isInteger(v)) broken.push("an integer")
  if (v < 1) broken.push("at least 1")
  if (v > Number.MAX_SAFE_INTEGER) broken.push(`at most ${Number.MAX_SAFE_INTEGER}`)
  if (broken.length === 0) return undefined
  if (broken.length === 1) return `seq must be ${broken[0]} (was ${v})`
  return `seq (${v}) must be...${broken.map((b) => `\n  ◦ ${b}`).join("")}`
}

function amountProblem(v: unknown): string | undefined {
  if (typeof v !== "number") return `amount must be a finite number (was ${domainOf(v)})`
  return Number.isFinite(v) ? undefined : `amount must be a finite number (was ${v})`
}

/** A value's kind as arktype names it in "(was ...)". */
function domainOf(v: unknown): string {
  if (v === null) return "null"
  switch (typeof v) {
    case "boolean":
      return "boolean"
    case "undefined":
      return "undefined"
    case "number":
      return "a number"
    case "string":
      return "a string"
    case "bigint":
      return "a bigint"
    case "symbol":
      return "a symbol"
    default:
      return "an object"
  }
}
