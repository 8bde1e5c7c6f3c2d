import fs from "node:fs"
import { join } from "node:path"
import { defaults } from "../consume/options.ts"
import { decodeMessage, requiredFields, validateMessage } from "../message/validate.ts"
import { isMessageName, type Queue } from "../queue/root.ts"
import { scanDir } from "../queue/scan.ts"
import { csvRow } from "./reports.ts"

/** A JSON type as schema.csv names it. */
type JsonType = "string" | "integer" | "number" | "boolean" | "object" | "array" | "null"

/** The role a field plays for spool. */
type FieldRole = "idempotency-key" | "ordering-key" | "sequence" | "amount" | "attribute"

/** One row of schema.csv. */
interface FieldInfo {
  readonly field: string
  readonly type: string
  readonly role: FieldRole
  /** How many of the sampled messages had it. */
  readonly count: number
}

// A Map, not an object: a message's own field may be named `constructor`, `toString` or
// `__proto__`, and an object's lookup would answer with what its prototype holds.
const roles: ReadonlyMap<string, FieldRole> = new Map([
  ["msg_id", "idempotency-key"],
  ["order_no", "ordering-key"],
  ["seq", "sequence"],
  ["amount", "amount"],
])

function jsonType(v: unknown): JsonType {
  if (v === null) return "null"
  if (Array.isArray(v)) return "array"
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number"
  return typeof v as JsonType
}

/**
 * Works out the message structure from the well-formed messages in inbox/, processing/ and
 * done/ (files that pass validation; poison never shapes the schema). Mixed integer and
 * non-integer numbers widen to `number`; other mixes are joined with `|`; `null` is only
 * listed when a field is never anything else.
 */
export function inferSchema(queue: Queue, limit = Number.POSITIVE_INFINITY): { fields: FieldInfo[]; sampled: number } {
  const seen = new Map<string, { types: Set<JsonType>; count: number }>()
  let sampled = 0
  outer: for (const dir of [queue.inbox, queue.processing, queue.done]) {
    for (const e of scanDir(dir)) {
      if (sampled >= limit) break outer
      if (!e.isFile() || !isMessageName(e.name)) continue
      const bytes = readMessageFile(join(dir, e.name))
      if (bytes === undefined) continue
      const d = decodeMessage(bytes, validateMessage)
      if (!d.ok) continue
      sampled++
      for (const [k, v] of Object.entries(d.value)) {
        const entry = seen.get(k) ?? { types: new Set<JsonType>(), count: 0 }
        entry.types.add(jsonType(v))
        entry.count++
        seen.set(k, entry)
      }
    }
  }
  const order = (k: string) => {
    const i = (requiredFields as readonly string[]).indexOf(k)
    return i < 0 ? requiredFields.length : i
  }
  const fields = [...seen]
    .sort(([a], [b]) => order(a) - order(b) || (a < b ? -1 : a > b ? 1 : 0))
    .map(([field, { types, count }]) => ({
      field,
      type: typeName(types),
      role: roles.get(field) ?? "attribute",
      count,
    }))
  return { fields, sampled }
}

const O_READ = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK

/**
 * A message file's bytes, or undefined for what consume would not accept as a message either:
 * gone meanwhile, not a regular file any more (never blocks on a FIFO swapped in after the
 * listing), or larger than consume's default size limit (such a file is `too-large`, never read).
 */
function readMessageFile(path: string): Buffer | undefined {
  let fd: number
  try {
    fd = fs.openSync(path, O_READ)
  } catch {
    return undefined
  }
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile() || st.size > defaults.maxBytes) return undefined
    const buffer = Buffer.allocUnsafe(st.size + 1)
    let n = 0
    while (n < buffer.length) {
      const r = fs.readSync(fd, buffer, n, buffer.length - n, n)
      if (r === 0) break
      n += r
    }
    return n > defaults.maxBytes ? undefined : buffer.subarray(0, n)
  } catch {
    return undefined
  } finally {
    fs.closeSync(fd)
  }
}

function typeName(types: Set<JsonType>): string {
  const t = new Set(types)
  if (t.size > 1) t.delete("null")
  if (t.has("number")) t.delete("integer")
  return [...t].sort().join("|")
}

/** schema.csv's text: `field,type,role` and one row per field. */
export function formatSchema(fields: readonly FieldInfo[]): string {
  return `field,type,role\n${fields.map((f) => csvRow([f.field, f.type, f.role])).join("")}`
}
