import { describe, expect, it } from "bun:test"
import { ArkErrors } from "@ark/schema"
import { rng } from "@spool/test-support"
import { isStorableText } from "../ledger/storable-text.ts"
import { Message } from "./type.ts"
import {
  canonicalContent,
  canonicalJson,
  decimalValue,
  decodeMessage,
  type MessageType,
  rawNumberField,
  validateMessage,
} from "./validate.ts"

const enc = (s: string) => new TextEncoder().encode(s)
const valid = { msg_id: "m1", order_no: "o1", seq: 1, amount: 1.5 }

// The engine validates with validateMessage; applications extend the arktype Message. Both
// come from one schema node, and every case below holds for each.
const validators: [string, MessageType<object>][] = [
  ["validateMessage", validateMessage],
  ["the arktype Message", Message],
]

describe.each(validators)("with %s", (_, V) => {
  describe("decodeMessage", () => {
    it.each([
      ["not JSON", "hello", "parse"],
      ["truncated JSON", '{"msg_id": "m1"', "parse"],
      ["an empty file", "", "parse"],
      ["an array", "[1,2]", "parse"],
      ["a string", '"x"', "parse"],
      ["null", "null", "parse"],
      ["a number", "42", "parse"],
      ["msg_id missing", JSON.stringify({ ...valid, msg_id: undefined }), "missing-field"],
      ["order_no null", JSON.stringify({ ...valid, order_no: null }), "missing-field"],
      ["msg_id empty", JSON.stringify({ ...valid, msg_id: "" }), "invalid-field"],
      ["seq zero", JSON.stringify({ ...valid, seq: 0 }), "invalid-field"],
      ["seq fractional", JSON.stringify({ ...valid, seq: 1.5 }), "invalid-field"],
      ["seq a string", JSON.stringify({ ...valid, seq: "1" }), "invalid-field"],
      ["amount a string", JSON.stringify({ ...valid, amount: "1.5" }), "invalid-field"],
      ["amount 1e400", '{"msg_id":"m1","order_no":"o1","seq":1,"amount":1e400}', "invalid-field"],
    ])("rejects %s as %s", (_, text, reason) => {
      const d = decodeMessage(enc(text), V)
      expect(d.ok).toBe(false)
      if (!d.ok) expect(d.reason as string).toBe(reason)
    })

    it("accepts a valid message with extra fields and a byte order mark", () => {
      const d = decodeMessage(enc(`\uFEFF${JSON.stringify({ ...valid, currency: "EUR" })}`), V)
      expect(d.ok).toBe(true)
    })

    it("says of a file cut short that its producer may still have been writing it, and what to do", () => {
      const whole = JSON.stringify(valid)
      for (const cut of [whole.slice(0, 20), whole.slice(0, -1), ""]) {
        const d = decodeMessage(enc(cut), V)
        expect(d).toMatchObject({ ok: false, reason: "parse" })
        expect(d.ok ? "" : d.detail).toContain("was its producer still writing it?")
        expect(d.ok ? "" : d.detail).toContain("--min-age")
      }
      // Broken, not cut short: no such guess.
      const broken = decodeMessage(enc(`${whole.slice(0, -1)},}`), V)
      expect(broken.ok ? "" : broken.detail).not.toContain("still writing")
    })

    it("rejects bytes that are not UTF-8 as parse", () => {
      const d = decodeMessage(new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), V)
      expect(d).toMatchObject({ ok: false, reason: "parse" })
    })
  })

  describe("decodeMessage details", () => {
    it.each([
      ["an empty object", "{}", "missing-field", "missing msg_id, order_no, seq, amount"],
      ["two nulls", JSON.stringify({ ...valid, seq: null, amount: null }), "missing-field", "missing seq, amount"],
      [
        "a missing field next to a wrong one",
        JSON.stringify({ ...valid, msg_id: 7, order_no: undefined }),
        "missing-field",
        "missing order_no",
      ],
    ])("lists every missing field for %s", (_, text, reason, detail) => {
      expect(decodeMessage(enc(text), V)).toEqual({ ok: false, reason: reason as "missing-field", detail })
    })

    it.each([
      ["msg_id", { ...valid, msg_id: 7 }],
      ["order_no", { ...valid, order_no: "" }],
      ["seq", { ...valid, seq: -1 }],
      ["amount", { ...valid, amount: true }],
    ])("names %s in the invalid-field detail", (field, value) => {
      const d = decodeMessage(enc(JSON.stringify(value)), V)
      expect(d).toMatchObject({ ok: false, reason: "invalid-field" })
      if (!d.ok) expect(d.detail).toContain(field)
    })

    it.each([
      [
        "a seq past 2^53",
        '{"msg_id":"m","order_no":"o","seq":12345678901234567891,"amount":1}',
        "seq must be at most 9007199254740991 (was 12345678901234567891)",
      ],
      [
        "a seq and an amount out of range",
        '{"msg_id":"m","order_no":"o","seq":-1.50,"amount":1e400}',
        "amount must be a finite number (was 1e400); seq (-1.50) must be...;   ◦ an integer;   ◦ at least 1",
      ],
      [
        "a number written longer than a detail should hold",
        `{"msg_id":"m","order_no":"o","seq":1${"0".repeat(99)},"amount":1}`,
        `seq must be at most 9007199254740991 (was 1${"0".repeat(59)}... (100 characters))`,
      ],
    ])("says the numbers as the file wrote them for %s, not as JSON.parse rounded them", (_, text, detail) => {
      expect(decodeMessage(enc(text), V)).toEqual({ ok: false, reason: "invalid-field", detail })
    })

    it("keeps every field of an accepted message and its text for the exact amount", () => {
      const text = '{"msg_id":"m1","order_no":"o1","seq":2,"amount":250.00,"currency":"EUR","lines":[1]}'
      const d = decodeMessage(enc(text), V)
      expect(d as unknown).toEqual({
        amountText: "250.00",
        ok: true,
        message: { msg_id: "m1", order_no: "o1", seq: 2, amount: 250, currency: "EUR", lines: [1] },
        value: { msg_id: "m1", order_no: "o1", seq: 2, amount: 250, currency: "EUR", lines: [1] },
        text,
      })
      if (d.ok) expect(rawNumberField(d.text, "amount")).toBe("250.00")
    })
  })
})

describe("rawNumberField", () => {
  it.each([
    ['{"amount": 1137.25}', "1137.25"],
    ['{"amount":0.1}', "0.1"],
    ['{"amount": 12345678901234567.89}', "12345678901234567.89"],
    ['{"x": {"amount": 2}, "amount": 3.10}', "3.10"],
    ['{"s": "\\"amount\\": 9", "amount": -0.5e-3}', "-0.5e-3"],
    ['{"amount": 1, "amount": 2.50}', "2.50"],
    ['{"am\\u006funt": 7.70}', "7.70"],
  ])("finds the source spelling in %s", (text, expected) => {
    expect(rawNumberField(text, "amount")).toBe(expected)
  })
})

describe("canonicalJson", () => {
  it("sorts keys by code unit at every level, flat or nested, whatever order they came in", () => {
    const flat = JSON.parse('{"b":1,"a":"x","10":null,"2":true,"1":1.5,"__proto__":0,"é":"e"}')
    expect(canonicalJson(flat)).toBe('{"1":1.5,"10":null,"2":true,"__proto__":0,"a":"x","b":1,"é":"e"}')
    const plain = JSON.parse('{"b":1,"__proto__":{},"a":"x"}')
    expect(canonicalJson(plain)).toBe('{"__proto__":{},"a":"x","b":1}')
    expect(canonicalJson(JSON.parse('{"b":1,"__proto__":2,"a":"x"}'))).toBe('{"__proto__":2,"a":"x","b":1}')
    const nested = JSON.parse('{"z":{"b":1,"a":[{"d":1,"c":2}]},"y":[],"x":{}}')
    expect(canonicalJson(nested)).toBe('{"x":{},"y":[],"z":{"a":[{"c":2,"d":1}],"b":1}}')
  })

  it("gives the same text for a flat message and the same message with a nested field removed", () => {
    const withNested = JSON.parse('{"seq":1,"msg_id":"m","extra":{"k":1}}')
    const flat = JSON.parse('{"seq":1,"msg_id":"m"}')
    expect(canonicalJson(withNested)).toBe('{"extra":{"k":1},"msg_id":"m","seq":1}')
    expect(canonicalJson(flat)).toBe('{"msg_id":"m","seq":1}')
  })
})

describe("a validator from another copy of arktype", () => {
  // Its ArkErrors is another class than this copy's: what it returns is recognised by its
  // arktype kind, so a rejection is never taken for the message.
  const foreign: MessageType<object> = (data) => {
    const out = validateMessage(data)
    if (!(out instanceof ArkErrors)) return out
    const copy = Object.assign([...out], { summary: out.summary, " arkKind": "errors" })
    return copy as unknown as ArkErrors
  }

  it("has its rejections rejected, with the same reason and detail", () => {
    for (const text of ["{}", JSON.stringify({ ...valid, seq: 0 }), JSON.stringify({ ...valid, msg_id: 7 })]) {
      const d = decodeMessage(enc(text), foreign)
      expect(d.ok).toBe(false)
      expect(d).toEqual(decodeMessage(enc(text), validateMessage))
    }
  })

  it("has its accepted messages accepted, even one that carries arktype's kind key", () => {
    expect(decodeMessage(enc(JSON.stringify(valid)), foreign)).toMatchObject({ ok: true, message: valid })
    const disguised = { ...valid, " arkKind": "errors" }
    for (const v of [foreign, validateMessage])
      expect(decodeMessage(enc(JSON.stringify(disguised)), v)).toMatchObject({ ok: true, message: disguised })
  })
})

describe("an application type that lets any string be an id", () => {
  // Its own rules say nothing about ids beyond their type: the ledger's key rule still holds.
  const loose: MessageType<object> = (data) => data as object

  it.each([
    [
      "msg_id",
      "U+0000",
      { ...valid, msg_id: "a\0b" },
      'msg_id must be well-formed Unicode without U+0000, or no ledger can store it as a key (was "a\\u0000b")',
    ],
    [
      "msg_id",
      "a lone surrogate",
      { ...valid, msg_id: "\ud800" },
      'msg_id must be well-formed Unicode without U+0000, or no ledger can store it as a key (was "\\ud800")',
    ],
    [
      "order_no",
      "U+0000",
      { ...valid, order_no: "\0" },
      'order_no must be well-formed Unicode without U+0000, or no ledger can store it as a key (was "\\u0000")',
    ],
    [
      "order_no",
      "a lone surrogate",
      { ...valid, order_no: "o\udfff" },
      'order_no must be well-formed Unicode without U+0000, or no ledger can store it as a key (was "o\\udfff")',
    ],
  ])("rejects %s carrying %s as invalid-field, with a storable detail", (_, __, value, detail) => {
    expect(decodeMessage(enc(JSON.stringify(value)), loose)).toEqual({ ok: false, reason: "invalid-field", detail })
    expect(isStorableText(detail)).toBe(true)
  })

  it("accepts ids with other control characters or surrogate pairs, as its rules say", () => {
    for (const msg_id of ["a\nb", "🧨", "\u0001"])
      expect(decodeMessage(enc(JSON.stringify({ ...valid, msg_id })), loose)).toMatchObject({ ok: true })
  })
})

describe("an id's length in bytes", () => {
  // Random letters, which no compressor shrinks much: a PostgreSQL index entry is limited in stored bytes.
  const letters = (n: number, seed: number) => {
    const next = rng(seed)
    return Array.from({ length: n }, () => String.fromCharCode(97 + Math.floor(next() * 26))).join("")
  }
  const loose: MessageType<object> = (data) => data as object

  it.each([...validators, ["an application type that lets any string be an id", loose] as const])(
    "accepts ids of up to 1024 bytes and rejects longer ones as invalid-field, with %s",
    (_, V) => {
      const decode = (m: object) => decodeMessage(enc(JSON.stringify({ ...valid, ...m })), V)
      expect(decode({ msg_id: letters(1024, 1), order_no: letters(1024, 2) })).toMatchObject({ ok: true })
      // 341 three-byte characters are 1023 bytes; 342 are 1026, though a 342-character ASCII id is fine.
      expect(decode({ msg_id: "€".repeat(341) })).toMatchObject({ ok: true })
      expect(decode({ msg_id: "e".repeat(342) })).toMatchObject({ ok: true })
      // Surrogate pairs are four bytes: 256 of them are 1024, one more is over.
      expect(decode({ order_no: "🧨".repeat(256) })).toMatchObject({ ok: true })
      const long = letters(8000, 3)
      expect(decode({ msg_id: long })).toEqual({
        ok: false,
        reason: "invalid-field",
        detail: `msg_id must be at most 1024 bytes in UTF-8 to be a ledger key (was 8000 bytes: "${long.slice(0, 40)}"...)`,
      })
      expect(decode({ msg_id: letters(1025, 4) })).toMatchObject({ ok: false, reason: "invalid-field" })
      expect(decode({ msg_id: "€".repeat(342) })).toMatchObject({
        ok: false,
        reason: "invalid-field",
        detail: expect.stringContaining("(was 1026 bytes: "),
      })
      expect(decode({ order_no: "🧨".repeat(257) })).toMatchObject({
        ok: false,
        reason: "invalid-field",
        detail: expect.stringMatching(
          /^order_no must be at most 1024 bytes in UTF-8 to be a ledger key \(was 1028 bytes: /,
        ),
      })
    },
  )
})

describe("canonicalContent", () => {
  const content = (text: string) => canonicalContent(JSON.parse(text), text)

  it("compares numbers by their written decimal value: trailing zeros and exponents do not matter", () => {
    expect(content('{"amount":1.0,"b":[2.50]}')).toBe(content('{"b":[2.5],"amount":1.00}'))
    expect(content('{"amount":1.1000000000000000000}')).toBe(content('{"amount":1.1}'))
    expect(content('{"amount":1.5e2}')).toBe(content('{"amount":150}'))
    expect(content('{"amount":-0}')).toBe(content('{"amount":0.000}'))
  })

  it("tells apart numbers that one double would merge, at any depth", () => {
    expect(content('{"amount":12345678901234567.88}')).not.toBe(content('{"amount":12345678901234567.89}'))
    expect(content('{"x":{"y":[9007199254740993]}}')).not.toBe(content('{"x":{"y":[9007199254740992]}}'))
    expect(content('{"amount":1.10000000000000000001}')).not.toBe(content('{"amount":1.1}'))
    expect(content('{"a":1e400}')).not.toBe(content('{"a":2e400}'))
  })

  it("writes exactly canonicalJson's text when no number is rounded, on either path", () => {
    for (const text of ['{"b":1,"a":"x"}', '{"id":"1234567890123456789","n":0.5}', '{"n":1e3,"m":[1.25,{"z":true}]}'])
      expect(content(text)).toBe(canonicalJson(JSON.parse(text)))
  })
})

describe("decimalValue", () => {
  it("spells each value one way", () => {
    expect(decimalValue("12.340")).toBe("1234e-2")
    expect(decimalValue("-0.00")).toBe("0")
    expect(decimalValue("1500")).toBe("15e2")
    expect(decimalValue("1.5E+3")).toBe("15e2")
    expect(decimalValue("007")).toBe("7e0")
    expect(decimalValue("Infinity")).toBeUndefined()
  })
})
