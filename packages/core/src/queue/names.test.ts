import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { alternateName, escapeUndecodable, quoteName, quoteRawName } from "./names.ts"

async function tempDir(): Promise<{ path: string } & AsyncDisposable> {
  const path = fs.mkdtempSync(join(os.tmpdir(), "spool-names-"))
  return { path, [Symbol.asyncDispose]: async () => fs.rmSync(path, { recursive: true, force: true }) }
}

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

describe("alternateName", () => {
  it.each([
    ["a.json", 1, "a~1.json"],
    ["a.json", 12, "a~12.json"],
    ["a.b.json", 2, "a.b~2.json"],
    ["noext", 3, "noext~3"],
    ["a.json.tmp", 1, "a.json.tmp~1"],
  ] as const)("%s #%d -> %s", (name, k, expected) => {
    expect(alternateName(name, k)).toBe(expected)
  })

  it("keeps a 255-byte name within 255 bytes and keeps its .json ending", () => {
    const name = `${"n".repeat(250)}.json`
    expect(Buffer.byteLength(name)).toBe(255)
    for (const k of [1, 9, 10, 12345]) {
      const alt = alternateName(name, k)
      expect(Buffer.byteLength(alt)).toBeLessThanOrEqual(255)
      expect(alt.endsWith(`~${k}.json`)).toBe(true)
      expect(alt).not.toBe(name)
    }
  })

  it("shortens a multi-byte stem by whole characters, never splitting one", () => {
    const name = `${"é".repeat(125)}.json` // 250 + 5 bytes; 124 é + "~1.json" is exactly 255
    const alt = alternateName(name, 1)
    expect(Buffer.byteLength(alt)).toBeLessThanOrEqual(255)
    expect(alt).toBe(`${"é".repeat(124)}~1.json`)
    expect(Buffer.from(alt).toString("utf8")).toBe(alt)
  })

  it("shortens a stem of %XX escapes by whole escapes, never leaving a % or %X behind", () => {
    for (const extra of ["", "a", "ab", "é", "日"]) {
      const name = `${extra}${"%FF".repeat(83)}.json` // 249 to 254 bytes before the ~k
      for (const k of [1, 10, 100]) {
        const alt = alternateName(name, k)
        expect(Buffer.byteLength(alt)).toBeLessThanOrEqual(255)
        expect(alt).toMatch(new RegExp(`^${extra}(%FF)*~${k}\\.json$`))
      }
    }
  })

  it("gives a name the filesystem accepts for a name at the limit", async () => {
    await using d = await tempDir()
    const name = `${"x".repeat(250)}.json`
    fs.writeFileSync(join(d.path, name), "a")
    fs.writeFileSync(join(d.path, alternateName(name, 1)), "b")
    expect(fs.readdirSync(d.path)).toHaveLength(2)
  })
})

describe("escapeUndecodable", () => {
  it.each([
    ["a valid name", Buffer.from("évt-1.json"), undefined],
    ["a lone bad byte", Buffer.from([0x61, 0xff, 0x2e, 0x6a, 0x73, 0x6f, 0x6e]), "a%FF.json"],
    [
      "Latin-1 é between valid UTF-8",
      Buffer.concat([Buffer.from("é"), Buffer.of(0xe9), Buffer.from("日.json")]),
      "é%E9日.json",
    ],
    ["a truncated UTF-8 sequence", Buffer.concat([Buffer.of(0xe6, 0x97), Buffer.from(".json")]), "%E6%97.json"],
  ])("%s", (_label, raw, expected) => {
    expect(escapeUndecodable(raw)).toBe(expected)
  })
})

describe("quoteRawName", () => {
  it.each([
    [Buffer.from("plain.json"), "plain.json"],
    [Buffer.concat([Buffer.from("x"), Buffer.of(0xff), Buffer.from(".json")]), "x$'\\377'.json"],
    [Buffer.concat([Buffer.of(0xfe, 0xff), Buffer.from("a b.json")]), "''$'\\376\\377''a b.json'"],
    [Buffer.concat([Buffer.from("é"), Buffer.of(0xc3), Buffer.from("\n.json")]), "é$'\\303'''$'\\n''.json'"],
  ])("quotes %p so that a shell reads back its exact bytes: %s", (raw, quoted) => {
    expect(quoteRawName(raw)).toBe(quoted)
    const echoed = Bun.spawnSync(["bash", "-c", `printf %s ${quoted}`]).stdout
    expect(Buffer.compare(Buffer.from(echoed), raw)).toBe(0)
  })
})
