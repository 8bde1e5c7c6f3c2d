// What text a ledger can hold. Both store UTF-8, in which U+0000 and a lone surrogate have no
// place: PostgreSQL refuses U+0000 in TEXT, and both characters in the JSON parameters that
// carry a batch's rows (one refused string aborts the whole batch's commit), while SQLite and
// PostgreSQL's text parameters silently turn a lone surrogate into U+FFFD. Every text a ledger
// stores is therefore storable: names by construction (readdir yields neither character, and a
// name that is not UTF-8 is renamed to its %XX spelling), ids by validation (a message whose
// msg_id or order_no is not storable is invalid-field: an escaped key could equal another
// one), reasons by being constants, and free text (details) by toStorableText.

/** Whether a ledger can store `text` exactly: it holds no U+0000 and no lone surrogate. */
export function isStorableText(text: string): boolean {
  return !text.includes("\0") && text.isWellFormed()
}

/**
 * `text` as both ledgers store it: each U+0000 and each lone surrogate written as a visible
 * JSON-style escape (`\u0000`, `\ud800`), everything else, surrogate pairs included, unchanged.
 */
export function toStorableText(text: string): string {
  if (isStorableText(text)) return text
  return text.replace(/[\0\p{Cs}]/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
}
