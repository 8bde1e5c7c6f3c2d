import { describe, expect, it } from "bun:test"
import { decodeWith } from "./decode.ts"
import { checkMessage } from "./rules.ts"
import { decodeMessage, validateMessage } from "./validate.ts"

// checkMessage is messageSchema compiled by hand; the schema node is the rule. Every file below
// must get the same verdict, reason and detail from both.
const enc = (s: string) => new TextEncoder().encode(s)
const bySchema = (text: string) => decodeMessage(enc(text), validateMessage)
const byRules = (text: string) => decodeWith(enc(text), checkMessage)

// JSON literals, so that numbers JSON.parse turns into Infinity, -0 or rounded values are in.
const pool: readonly (string | undefined)[] = [
  undefined, // the field absent
  "null",
  '""',
  '"m-1"',
  '"é 🙂 \\u2028"',
  '"a\\u0001b"',
  '"\\u0085"',
  '"\\ud800"',
  '"\\udc00z"',
  '"\\u0000"',
  `"${"x".repeat(300)}\\u001f"`,
  '"q\\"uo\\\\te\\u0007"',
  "0",
  "-0",
  "1",
  "-1",
  "1.5",
  "0.5",
  "-1e-7",
  "9007199254740991",
  "9007199254740992",
  "1152921504606846977",
  "1e308",
  "1e999",
  "-1e999",
  "true",
  "false",
  "{}",
  '{"a":1}',
  "[]",
  "[1]",
]
const fields = ["msg_id", "order_no", "seq", "amount"] as const
// One of each kind of verdict, for the full product of the four fields.
const few = [undefined, "null", '""', '"m-1"', '"a\\u0001b"', "0", "1.5", "1e999", "true", "{}"]
const valid = ['"m-1"', '"o-1"', "1", "1.5"]
const bad = ['""', "7", "-1.5", '"x"']

const object = (values: readonly (string | undefined)[]): string =>
  `{${fields.flatMap((f, i) => (values[i] === undefined ? [] : [`"${f}":${values[i]}`])).join(",")}}`

/** Every combination of `few`; then each field through the whole pool, the others valid, then all bad. */
function* cases(): Generator<string> {
  const product = (at: number, values: (string | undefined)[]): string[] =>
    at === fields.length ? [object(values)] : few.flatMap((v) => product(at + 1, [...values, v]))
  yield* product(0, [])
  for (const others of [valid, bad])
    for (const [i] of fields.entries()) for (const v of pool) yield object(others.map((o, j) => (j === i ? v : o)))
}

describe("checkMessage", () => {
  it("judges every combination of hostile values as the schema node does, word for word", () => {
    let n = 0
    const differ: string[] = []
    for (const text of cases()) {
      n++
      const a = bySchema(text)
      const b = byRules(text)
      const same = a.ok && b.ok ? a.message === b.message || JSON.stringify(a) === JSON.stringify(b) : a.ok === b.ok
      if (!same || (!a.ok && !b.ok && (a.reason !== b.reason || a.detail !== b.detail)))
        if (differ.push(`${text}\n  schema: ${JSON.stringify(a)}\n  rules:  ${JSON.stringify(b)}`) >= 5) break
    }
    expect(differ).toEqual([])
    expect(n).toBe(few.length ** fields.length + 2 * fields.length * pool.length)
  })

  it.each([
    ["extra fields, nested", '{"msg_id":"m","order_no":"o","seq":2,"amount":3.25,"lines":[{"sku":"a"}],"n":null}'],
    ["duplicate keys (the last wins)", '{"msg_id":"m","order_no":"o","seq":"x","seq":2,"amount":1,"amount":"no"}'],
    ["a field named like a prototype's", '{"__proto__":{"msg_id":"m"},"order_no":"o","seq":1,"amount":1}'],
    ["a BOM, whitespace", '\ufeff {\n "msg_id" : "m" , "order_no":"o","seq":1.0,"amount":-0.0 }\n'],
    ["seq whole only as a double", '{"msg_id":"m","order_no":"o","seq":2.0000000000000001,"amount":1}'],
    ["an id with U+0000", '{"msg_id":"a\\u0000","order_no":"o","seq":1,"amount":1}'],
    ["not an object", "[1,2]"],
    ["not JSON", "{"],
  ])("agrees with the schema node on %s", (_, text) => {
    expect(byRules(text)).toEqual(bySchema(text))
  })

  it("accepts a valid message as the object JSON.parse made, and lists missing fields in the documented order", () => {
    const ok = byRules('{"amount":1,"seq":3,"order_no":"o","msg_id":"m"}')
    expect(ok.ok && ok.message).toEqual({ amount: 1, seq: 3, order_no: "o", msg_id: "m" })
    expect(byRules('{"seq":null}')).toEqual({
      ok: false,
      reason: "missing-field",
      detail: "missing msg_id, order_no, seq, amount",
    })
  })
})
