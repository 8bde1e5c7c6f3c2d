import { ArkErrors, hasArkKind, type RootSchema, rootSchema } from "@ark/schema"
import { type Checked, type Decoded, decodeWith, type Message, requiredFields } from "./decode.ts"

export type { Accepted, Checked, Decoded, Message, Rejected, RejectReason } from "./decode.ts"
export {
  canonicalContent,
  canonicalJson,
  decimalValue,
  decodeWith,
  rawNumberField,
  requiredFields,
} from "./decode.ts"

// The rules of a spool message, written once as an @ark/schema node: the schema layer
// arktype is built on (same project, same version as the arktype dependency), which compiles
// this into the same validator and the same error texts as arktype's own syntax would.
// `Message` (type.ts) is the arktype Type of the same node, for applications that
// extend it: `Message.and({ ... })`. consume's default path does not import this module:
// @ark/schema costs a process about 0.1 s and 23 MB at import, and its nodes stay in the heap
// every garbage collection walks. It checks with rules.ts, these rules compiled by
// hand, which rules.test.ts holds to this node: the same verdict and the same text
// for every combination of a pool of hostile values.
//
// Constraints are ranges and a pattern, never predicates: they compile into one check of
// about 0.1 us, while a predicate builds a traversal context for every message (1.3 us).

// Ids are a TEXT primary key stored as UTF-8 and lines of dup.txt: a lone surrogate would be
// stored as U+FFFD (two different ids would collide), U+0000 is refused by PostgreSQL, and a
// line break would split a line.
const id = {
  domain: "string",
  minLength: 1,
  pattern: [{ rule: "^[^\\p{Cc}\\p{Cs}]*$", flags: "u", meta: "well-formed Unicode without control characters" }],
} as const satisfies RootSchema

// JSON has no NaN, but `1e999` parses to Infinity.
const finiteNumber = {
  domain: { domain: "number", meta: "a finite number" },
  min: { rule: -Number.MAX_VALUE, meta: "a finite number" },
  max: { rule: Number.MAX_VALUE, meta: "a finite number" },
  meta: "a finite number",
} as const satisfies RootSchema

/** The fields every spool message must carry; other fields are kept but not interpreted. */
export const messageSchema = {
  domain: "object",
  required: [
    { key: "msg_id", value: id },
    { key: "order_no", value: id },
    // A safe integer >= 1 (NaN cannot come out of JSON.parse).
    {
      key: "seq",
      value: { domain: { domain: "number", numberAllowsNaN: false }, divisor: 1, min: 1, max: Number.MAX_SAFE_INTEGER },
    },
    { key: "amount", value: finiteNumber },
  ],
} as const satisfies RootSchema

/** spool's own validator, compiled from messageSchema: what consume uses by default. */
export const validateMessage = rootSchema(messageSchema) as unknown as MessageType<Message>

/** The shape a message validator must have: an arktype type (or any function like one). */
export type MessageType<T> = (data: unknown) => T | ArkErrors

/**
 * Decodes and validates one message file's bytes against a validator: validateMessage, or an
 * arktype type such as `Message.and({ ... })` (see decodeWith for what every message must be).
 * consume's default path checks with checkMessage instead, the same rules without @ark/schema.
 */
export function decodeMessage<T extends object>(bytes: Uint8Array, schema: MessageType<T>): Decoded<T> {
  return decodeWith(bytes, (record) => checkWith(schema, record))
}

/** An arktype validator's verdict on a parsed object, its errors read as spool's reasons. */
function checkWith<T extends object>(schema: MessageType<T>, record: Record<string, unknown>): Checked<T> {
  const out = schema(record)
  // By its kind, not only its class: an application's type may come from another copy of
  // arktype, whose ArkErrors is another class; its errors must not pass for a message. An
  // errors list is an array, which a message never is: a message carrying arktype's kind key
  // is still a message.
  if (out instanceof ArkErrors || (Array.isArray(out) && hasArkKind(out, "errors"))) {
    const missing = out.filter((e) => {
      const key = e.path[0]
      return e.path.length === 1 && typeof key === "string" && (!Object.hasOwn(record, key) || record[key] === null)
    })
    if (missing.length > 0) {
      // In the order messages are documented (arktype reports them alphabetically).
      const order = (k: string) => {
        const i = (requiredFields as readonly string[]).indexOf(k)
        return i < 0 ? requiredFields.length : i
      }
      const keys = [...new Set(missing.map((e) => String(e.path[0])))].sort((a, b) => order(a) - order(b))
      return { ok: false, reason: "missing-field", detail: `missing ${keys.join(", ")}` }
    }
    return { ok: false, reason: "invalid-field", detail: out.summary.replaceAll("\n", "; ") }
  }
  return { ok: true, message: out as T }
}
