// File names as text: how spool prints them, and how it spells a name that is not UTF-8.

// Characters that no shell treats specially anywhere in a word (GNU quotearg's list).
const plain = /^[A-Za-z0-9%+,\-./:@\]_]$/
// Characters printed as escapes, never as themselves: controls (C0, DEL, C1), format
// characters (bidi overrides, zero-width), unassigned and private-use code points, lone
// surrogates, line and paragraph separators, and every space but U+0020, all of which a
// terminal shows as nothing, as something else, or as a plain space.
const unprintable = /^(?:[\p{C}\p{Zl}\p{Zp}]|(?! )\p{Zs})$/u
// Inside double quotes a shell still expands these; a name holding one is single-quoted.
const doubleQuoteSpecial = /[$`\\"!]/
const cEscapes: Readonly<Record<number, string>> = { 7: "a", 8: "b", 9: "t", 10: "n", 11: "v", 12: "f", 13: "r" }

/**
 * A file name as spool prints it in text output: as it is when every character is one no
 * shell treats specially, else quoted in the style of GNU `ls --quoting-style=shell-escape`,
 * so that a shell (bash, zsh, ksh, or any POSIX sh that knows `$'...'`) reads it back as the
 * exact name: `a b.json` -> `'a b.json'`, `a\nb.json` -> `'a'$'\n''b.json'`.
 */
export function quoteName(name: string): string {
  const chars = [...name]
  if (chars.length > 0 && chars.every((c, i) => isPlain(c, i, chars.length))) return name
  if (!chars.some((c) => unprintable.test(c))) {
    if (name.includes("'") && !doubleQuoteSpecial.test(name)) return `"${name}"`
    return singleQuoted(name)
  }
  let out = ""
  let run = ""
  let isEscapeRun = false
  const flush = () => {
    if (run === "") return
    out += isEscapeRun ? `$'${run}'` : singleQuoted(run)
    run = ""
  }
  for (const c of chars) {
    const isEscape = unprintable.test(c)
    if (isEscape !== isEscapeRun) {
      flush()
      isEscapeRun = isEscape
    }
    run += isEscape ? escapeChar(c) : c
  }
  flush()
  // A quoted word starts with a quote, never with `$`: a reader splitting on words sees one.
  return out.startsWith("$") ? `''${out}` : out
}

function isPlain(c: string, i: number, length: number): boolean {
  if (plain.test(c)) return true
  // `{` and `}` alone are shell syntax; `#` and `~` only at the start of a word.
  if (c === "{" || c === "}") return length > 1
  if (c === "#" || c === "~") return i > 0
  return c.charCodeAt(0) > 0x7f && !unprintable.test(c)
}

function singleQuoted(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`
}

/** One character inside `$'...'`: a C escape where there is one, else its UTF-8 bytes in octal. */
function escapeChar(c: string): string {
  const code = c.codePointAt(0) as number
  const named = cEscapes[code]
  if (named !== undefined) return `\\${named}`
  return [...Buffer.from(c)].map((b) => `\\${b.toString(8).padStart(3, "0")}`).join("")
}
