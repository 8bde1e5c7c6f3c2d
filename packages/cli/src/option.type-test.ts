// Type tests, checked by `tsc` (bun run typecheck), never run: a command body sees each option
// as its kind parses it, and as undefined only when it can be absent. Each @ts-expect-error
// fails the typecheck if the line below it ever compiles.
import type { Values } from "./option.ts"
import { choice, duration, flag, integer, text } from "./option.ts"
import { root } from "./options.ts"

const options = {
  root,
  json: flag("json"),
  window: duration("window", { default: "24h" }),
  "max-age": duration("age"),
  batch: integer("batch", { default: "10", min: 1 }),
  format: choice("FORMAT", ["line", "json"], "format"),
  match: text("GLOB", "glob", { multiple: true }),
}
declare const v: Values<typeof options>

export function typeTests(): void {
  const isJson: boolean = v.json
  const windowMs: number = v.window
  const batch: number = v.batch
  const maybeRoot: string | undefined = v.root
  const maybeAge: number | undefined = v["max-age"]
  const format: "line" | "json" | undefined = v.format
  const globs: string[] | undefined = v.match
  // @ts-expect-error a value option without a default can be absent
  const age: number = v["max-age"]
  // @ts-expect-error a duration is parsed into milliseconds, not kept as text
  const windowText: string = v.window
  // @ts-expect-error a choice is one of its choices
  const other: "xml" = v.format
  // @ts-expect-error no such option
  void v.bogus
  void [isJson, windowMs, batch, maybeRoot, maybeAge, format, globs, age, windowText, other]
}
