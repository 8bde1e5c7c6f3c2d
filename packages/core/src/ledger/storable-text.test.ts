import { describe, expect, test } from "bun:test"
import { isStorableText, toStorableText } from "./storable-text.ts"

describe("storable text", () => {
  test.each([
    ["plain ASCII", "msg_id must be a string", "msg_id must be a string"],
    ["the empty string", "", ""],
    ["U+0000 alone", "\0", "\\u0000"],
    ["U+0000 inside text", "token '\0' here", "token '\\u0000' here"],
    ["several U+0000", "\0a\0\0", "\\u0000a\\u0000\\u0000"],
    ["a lone high surrogate", "a\ud800", "a\\ud800"],
    ["a lone low surrogate", "\udfffz", "\\udfffz"],
    ["a low surrogate before a high one", "\udc00\ud800", "\\udc00\\ud800"],
    ["a surrogate pair, which is one character", "𝄞 \ud834\udd1e", "𝄞 𝄞"],
    ["a pair next to a lone surrogate", "\ud83e\udde8\ud800", "🧨\\ud800"],
    ["a high surrogate at the end after a pair", "🧨\ud83e", "🧨\\ud83e"],
    ["other control characters, which both ledgers store", "a\u0001\n\t\u007f", "a\u0001\n\t\u007f"],
    ["U+FFFD and non-characters", "\uFFFD\uFFFF", "\uFFFD\uFFFF"],
    ["text that already spells an escape", "was \\u0000", "was \\u0000"],
    ["both characters together", "\0\udbff", "\\u0000\\udbff"],
  ])("writes %s as storable text", (_, text, stored) => {
    const out = toStorableText(text)
    expect(out).toBe(stored)
    expect(isStorableText(out)).toBe(true)
  })

  test.each([
    ["storable text", "ünïcødé 日本語 🧨", true],
    ["the empty string", "", true],
    ["U+0000", "a\0", false],
    ["a lone surrogate", "\ud800", false],
    ["a surrogate pair", "\ud83e\udde8", true],
  ])("isStorableText judges %s", (_, text, expected) => {
    expect(isStorableText(text)).toBe(expected)
  })
})
