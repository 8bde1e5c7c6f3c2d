// spool's message rules are written once, as an @ark/schema node (messageSchema). The engine
// validates with that node compiled directly (validateMessage); applications get it as an
// arktype Type (Message). These properties hold both to the rules as arktype's own syntax
// states them, the reference below: for any value, the three accept the same values, return
// the same message, and reject with the same error text.
import { describe, expect, it } from "bun:test"
import { decodeMessage, Message, validateMessage } from "@spool/core"
import { type } from "arktype"
import fc from "fast-check"

const id = type("string > 0").and(
  type(/^[^\p{Cc}\p{Cs}]*$/u).describe("well-formed Unicode without control characters"),
)
const reference = type({
  msg_id: id,
  order_no: id,
  seq: "number.safe & number.integer >= 1",
  amount: type("number").atLeast(-Number.MAX_VALUE).atMost(Number.MAX_VALUE).describe("a finite number"),
  "+": "ignore",
})

/** What a validator says about a value, as comparable text. */
function verdict(validate: (v: unknown) => unknown, value: unknown): string {
  const out = validate(value)
  return out instanceof type.errors ? `rejected: ${out.summary}` : `accepted: ${JSON.stringify(out)}`
}

// Values near the rules' edges, and anything else JSON (and a little more) can hold.
const idLike = fc.oneof(
  fc.constantFrom("", "a", "m-1", "é", "𝄞", "a\u0000b", "line\nbreak", "\ud800", "tab\t", "\u007f", "\u0085"),
  fc.string({ unit: "binary", maxLength: 6 }),
  fc.integer(),
  fc.constant(null),
)
const numberLike = fc.oneof(
  fc.constantFrom(0, 1, -1, 1.5, 2 ** 53 - 1, 2 ** 53, -0, Number.MAX_VALUE, -Number.MAX_VALUE),
  fc.constantFrom(Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, Number.NaN),
  fc.double(),
  fc.integer(),
  fc.constantFrom("1", true, null, [], {}),
)
const candidate = fc.oneof(
  fc.record(
    { msg_id: idLike, order_no: idLike, seq: numberLike, amount: numberLike, extra: fc.jsonValue({ maxDepth: 2 }) },
    { requiredKeys: [] },
  ),
  fc.jsonValue({ maxDepth: 3 }),
  fc.anything({ maxDepth: 2 }),
)

describe("the message rules", () => {
  it("validateMessage and Message judge every value as arktype's own definition of the rules does", () => {
    fc.assert(
      fc.property(candidate, (value) => {
        const expected = verdict(reference, value)
        expect(verdict(validateMessage, value)).toBe(expected)
        expect(verdict(Message, value)).toBe(expected)
      }),
      { numRuns: 5000 },
    )
  })

  it("decodeMessage gives the same outcome with either validator", () => {
    fc.assert(
      fc.property(candidate, (value) => {
        const bytes = new TextEncoder().encode(JSON.stringify(value) ?? "undefined")
        expect(decodeMessage(bytes, validateMessage)).toEqual(decodeMessage(bytes, Message))
      }),
      { numRuns: 2000 },
    )
  })

  it("Message extends as an arktype Type", () => {
    const Payment = Message.and({ currency: "'EUR' | 'USD'" })
    const ok = { msg_id: "m", order_no: "o", seq: 1, amount: 2, currency: "EUR" as const }
    expect(Payment(ok)).toEqual(ok)
    expect(verdict(Payment, { ...ok, currency: "GBP" })).toBe(`rejected: currency must be "EUR" or "USD" (was "GBP")`)
    expect(verdict(Payment, { ...ok, seq: 0 })).toBe("rejected: seq must be at least 1 (was 0)")
  })
})
