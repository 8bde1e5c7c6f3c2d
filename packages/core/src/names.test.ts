import { describe, expect, it } from "bun:test"
import { quoteName } from "./names.ts"

describe("quoteName", () => {
  // Each expected text is what GNU ls --quoting-style=shell-escape prints in a UTF-8 locale.
  it.each([
    ["plain.json", "plain.json"],
    ["evt-0001.json", "evt-0001.json"],
    ["+x.json", "+x.json"],
    ["-x.json", "-x.json"],
    ["@x.json", "@x.json"],
    ["a,b%c:d]e_f.json", "a,b%c:d]e_f.json"],
    ["a~b#c{d}.json", "a~b#c{d}.json"],
    ["ünïcødé-日本語.json", "ünïcødé-日本語.json"],
    ["=x.json", "'=x.json'"],
    ["a=b.json", "'a=b.json'"],
    ["a b.json", "'a b.json'"],
    ["~a.json", "'~a.json'"],
    ["#a.json", "'#a.json'"],
    ["{", "'{'"],
    ["a\\b.json", "'a\\b.json'"],
    ['a"b.json', "'a\"b.json'"],
    ["$(touch x).json", "'$(touch x).json'"],
    ["a*b?[c].json", "'a*b?[c].json'"],
    ["a'b.json", `"a'b.json"`],
    ["a'b c.json", `"a'b c.json"`],
    ["a'b$c.json", "'a'\\''b$c.json'"],
    ["a'b\"c.json", "'a'\\''b\"c.json'"],
    ["a\nb.json", "'a'$'\\n''b.json'"],
    ["a\tb\rc.json", "'a'$'\\t''b'$'\\r''c.json'"],
    ["a\x01b\x1b.json", "'a'$'\\001''b'$'\\033''.json'"],
    ["a\x7f.json", "'a'$'\\177''.json'"],
    ["\u0085x.json", "''$'\\302\\205''x.json'"],
    ["a\u2028b.json", "'a'$'\\342\\200\\250''b.json'"],
    ["a'b\nc.json", "'a'\\''b'$'\\n''c.json'"],
    ["\n", "''$'\\n'"],
    ["", "''"],
  ])("%j -> %s", (name, expected) => {
    expect(quoteName(name)).toBe(expected)
  })

  it("escapes what a terminal would hide or show as something else, which ls prints raw", () => {
    expect(quoteName("a\u202eb.json")).toBe("'a'$'\\342\\200\\256''b.json'") // right-to-left override
    expect(quoteName("a\u200bb.json")).toBe("'a'$'\\342\\200\\213''b.json'") // zero-width space
    expect(quoteName("a\u00a0b.json")).toBe("'a'$'\\302\\240''b.json'") // no-break space
  })

  it("gives text that bash reads back as the exact name", () => {
    const names = [
      "plain.json",
      "a b.json",
      "a'b.json",
      "'",
      "a'b$c`d\\e\"f!g.json",
      "a\nb\tc\rd\x01e\x7ff.json",
      "\x01",
      "é\u202e\u2028\u00a0.json",
      "=cmd|' -C calc'!A0.json",
      "{",
      "~",
    ]
    const script = names.map((n) => `printf '%s\\0' ${quoteName(n)}`).join("\n")
    const r = Bun.spawnSync(["bash", "-c", script])
    expect(r.stdout.toString().split("\0").slice(0, -1)).toEqual(names)
    expect(r.exitCode).toBe(0)
  })
})
