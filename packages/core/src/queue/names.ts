// File names as text: how spool prints them, spells one that is not UTF-8, and shortens one.

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

/** The longest file name Linux filesystems take, in bytes. */
const NAME_MAX = 255

/** True when `name` fits the filesystem's name limit (255 bytes of UTF-8). */
export function fitsNameMax(name: string): boolean {
  return Buffer.byteLength(name) <= NAME_MAX
}

/**
 * The k-th alternative for a name that is taken at a destination: `a.json` -> `a~1.json`.
 * The stem is shortened so the result still fits the 255-byte name limit, by whole
 * characters and whole `%XX` escapes: a cut never splits a UTF-8 sequence or an escape.
 */
export function alternateName(name: string, k: number): string {
  const dot = name.endsWith(".json") ? name.length - 5 : name.length
  const tail = `~${k}${name.slice(dot)}`
  const budget = NAME_MAX - Buffer.byteLength(tail)
  let stem = name.slice(0, dot)
  let bytes = Buffer.byteLength(stem)
  while (bytes > budget && stem.length > 0) {
    const last = /%[0-9A-F]{2}$/.test(stem) ? stem.slice(-3) : ([...stem.slice(-2)].at(-1) as string)
    stem = stem.slice(0, -last.length)
    bytes -= Buffer.byteLength(last)
  }
  return stem + tail
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/**
 * A name's bytes in runs: each character of valid UTF-8 as text, each byte that is part of none
 * as a number. Decoding the whole at once would turn those bytes into U+FFFD and lose them.
 */
function* utf8Runs(raw: Uint8Array): Generator<string | number> {
  for (let i = 0; i < raw.length; ) {
    let n = 1
    for (; n <= 4 && i + n <= raw.length; n++) {
      try {
        yield strictUtf8.decode(raw.subarray(i, i + n))
        break
      } catch {}
    }
    if (n > 4 || i + n > raw.length) {
      yield raw[i] as number
      n = 1
    }
    i += n
  }
}

/**
 * A name's bytes as `quoteName` quotes text, each byte that is not part of valid UTF-8 written
 * as an octal escape in `$'...'` (`a\xff.json` -> `a$'\377'.json`): pasted into a shell, the
 * exact name, where its %XX spelling (escapeUndecodable) may be another file's real name.
 */
export function quoteRawName(raw: Uint8Array): string {
  let out = ""
  let text = ""
  let bytes = ""
  for (const run of [...utf8Runs(raw), ""]) {
    if (typeof run === "number") {
      if (text !== "") out += quoteName(text)
      text = ""
      bytes += `\\${run.toString(8).padStart(3, "0")}`
      continue
    }
    if (bytes !== "") out += `$'${bytes}'`
    bytes = ""
    text += run
  }
  if (text !== "") out += quoteName(text)
  return out.startsWith("$") ? `''${out}` : out
}

/**
 * The name with each byte that is not part of valid UTF-8 written as %XX (`a\xff.json` ->
 * `a%FF.json`); undefined when the whole name is valid UTF-8. The result may pass 255 bytes
 * (each bad byte takes three): alternateName shortens it without splitting an escape.
 */
export function escapeUndecodable(raw: Uint8Array): string | undefined {
  try {
    strictUtf8.decode(raw)
    return undefined
  } catch {}
  let out = ""
  for (const run of utf8Runs(raw))
    out += typeof run === "number" ? `%${run.toString(16).toUpperCase().padStart(2, "0")}` : run
  return out
}
