import { SpoolError } from "@spool/core/engine"
import { suggestion } from "./suggest.ts"
import { parseBytes, parseDuration, parseInteger } from "./value.ts"

/** An option that is there or not: `--json`. */
export interface FlagOption {
  readonly kind: "flag"
  /** Its line in --help. */
  readonly help: string
  readonly short?: string
}

/** An option that takes a value: `--root DIR`, `--window DURATION`. */
export interface ValueOption {
  /** How the value's text is parsed: kept as text, or into milliseconds, a count, bytes, one of `choices`. */
  readonly kind: "text" | "duration" | "integer" | "bytes" | "choice"
  /** Its line in --help, without the default, which is added from `default` or `fallback`. */
  readonly help: string
  /** The value's name in --help: DIR, URL, DURATION, N, SIZE. */
  readonly value: string
  readonly short?: string
  /** The text taken when the option is absent, parsed as a given one is, and shown in --help. */
  readonly default?: string
  /** What the command does when the option is absent, shown in --help (`$SPOOL_ROOT, else ./spool`). */
  readonly fallback?: string
  /** Whether it may be given more than once; its value is then the list of them. */
  readonly multiple?: boolean
  /** The smallest value taken (milliseconds, bytes or a count, as the kind parses). */
  readonly min?: number
  /** The values a `choice` takes. */
  readonly choices?: readonly string[]
  /** A value to show in a message about a text it does not take (a duration's, when no default fits). */
  readonly example?: string
}

/** One option of a command: everything its parsing and its --help line need. */
export type OptionSpec = FlagOption | ValueOption

/** A command's options by long name (`"dry-run"` is `--dry-run`). */
export type Options = Readonly<Record<string, OptionSpec>>

type Parsed<O> = O extends { kind: "flag" }
  ? boolean
  : O extends { kind: "choice"; choices: readonly (infer C)[] }
    ? C
    : O extends { kind: "text" }
      ? string
      : number

type ValueOf<O> = O extends { kind: "flag" }
  ? boolean
  : O extends { multiple: true }
    ? Parsed<O>[] | undefined
    : O extends { default: string }
      ? Parsed<O>
      : Parsed<O> | undefined

/** The parsed options of a command: a flag is a boolean, a value its parsed kind (undefined when absent without a default). */
export type Values<O extends Options> = { readonly [K in keyof O]: ValueOf<O[K]> }

interface ValueDetails {
  readonly short?: string
  readonly example?: string
  readonly default?: string
  readonly fallback?: string
  readonly multiple?: boolean
  readonly min?: number
}

type Empty = Record<never, never>

/** An option that is there or not. */
export function flag<const D extends { readonly short?: string } = Empty>(
  help: string,
  details?: D,
): { readonly kind: "flag"; readonly help: string } & D {
  return { kind: "flag", help, ...(details as D) }
}

/** An option whose value is kept as text: a path, a URL, a name. */
export function text<const D extends ValueDetails = Empty>(
  value: string,
  help: string,
  details?: D,
): { readonly kind: "text"; readonly value: string; readonly help: string } & D {
  return { kind: "text", value, help, ...(details as D) }
}

/** An option whose value is a duration with its unit (`30s`, `5m`, `90d`), parsed into milliseconds. */
export function duration<const D extends ValueDetails = Empty>(
  help: string,
  details?: D,
): { readonly kind: "duration"; readonly value: "DURATION"; readonly help: string } & D {
  return { kind: "duration", value: "DURATION", help, ...(details as D) }
}

/** An option whose value is a whole number, at least `min` (default 0). */
export function integer<const D extends ValueDetails = Empty>(
  help: string,
  details?: D,
): { readonly kind: "integer"; readonly value: "N"; readonly help: string } & D {
  return { kind: "integer", value: "N", help, ...(details as D) }
}

/** An option whose value is a size (`512k`, `1m`), parsed into bytes. */
export function bytes<const D extends ValueDetails = Empty>(
  help: string,
  details?: D,
): { readonly kind: "bytes"; readonly value: "SIZE"; readonly help: string } & D {
  return { kind: "bytes", value: "SIZE", help, ...(details as D) }
}

/** An option whose value is one of `choices`. */
export function choice<const C extends readonly string[], const D extends ValueDetails = Empty>(
  value: string,
  choices: C,
  help: string,
  details?: D,
): { readonly kind: "choice"; readonly value: string; readonly choices: C; readonly help: string } & D {
  return { kind: "choice", value, choices, help, ...(details as D) }
}

/** The flag as the user types it. */
export function flagName(name: string): string {
  return `--${name}`
}

/** Parses one value of option `name` from its text; a text it does not take is a usage error. */
export function parseValue(name: string, option: ValueOption, text: string): string | number {
  const flag = flagName(name)
  switch (option.kind) {
    case "text":
      return text
    case "integer":
      return parseInteger(text, flag, option.min ?? 0)
    case "bytes":
      return atLeast(flag, option, parseBytes(text, flag), text)
    case "duration":
      return atLeast(flag, option, parseDuration(text, flag, option.example ?? option.default), text)
    case "choice": {
      const choices = option.choices ?? []
      if (choices.includes(text)) return text
      const list = choices.length === 2 ? `${choices[0]} or ${choices[1]}` : `one of ${choices.join(", ")}`
      const near = suggestion(text, choices)
      throw new SpoolError(
        "usage",
        `${flag} takes ${list}, not ${JSON.stringify(text)}${near === undefined ? "" : ` (did you mean ${near}?)`}`,
      )
    }
  }
}

function atLeast(flag: string, option: ValueOption, n: number, text: string): number {
  if (option.min === undefined || n >= option.min) return n
  const bound =
    option.kind === "duration" && option.min === 1
      ? "longer than 0"
      : `at least ${option.min}${option.kind === "duration" ? "ms" : option.min === 1 ? " byte" : " bytes"}`
  throw new SpoolError("usage", `${flag} must be ${bound}, not ${JSON.stringify(text)}`)
}
