import type { OptionSpec, Options } from "./option.ts"
import { help, version } from "./options.ts"

/** A positional argument of a command, for its --help. */
export interface Argument {
  /** As the usage line writes it: `DIR`, `FILE...`. */
  readonly name: string
  readonly help: string
}

/** What --help shows of a command; `CommandSpec` is one. */
export interface HelpSpec {
  readonly usage: string
  readonly summary: string
  readonly description?: string
  readonly arguments?: readonly Argument[]
  readonly options: Options
}

const width = 110

const exitCodes =
  "Exit codes: 0 ok, 1 check failed or refused (nothing changed), 2 usage or not a queue, 3 runtime failure."

/**
 * The --help text of a command, made from its spec: every option's line comes from the option
 * itself, and the options every command takes (`--help`, `--version`) come last.
 */
export function helpText(spec: HelpSpec): string {
  const sections = [`Usage: ${spec.usage}`, spec.summary]
  if (spec.description !== undefined) sections.push(spec.description)
  if (spec.arguments !== undefined && spec.arguments.length > 0)
    sections.push(`Arguments:\n${table(spec.arguments.map((a) => [a.name, a.help]))}`)
  const options = Object.entries({ ...spec.options, help, version }).map(([name, o]): [string, string] => [
    label(name, o),
    line(o),
  ])
  sections.push(`Options:\n${table(options)}`, exitCodes)
  return `${sections.join("\n\n")}\n`
}

/** Two columns, the second wrapped to the width and aligned under itself. */
export function table(rows: readonly (readonly [string, string])[]): string {
  const left = Math.max(...rows.map(([l]) => l.length)) + 2
  return rows
    .map(([l, r]) => {
      const lines = wrap(r, Math.max(40, width - 2 - left))
      return lines.map((text, i) => `  ${(i === 0 ? l : "").padEnd(left)}${text}`.trimEnd()).join("\n")
    })
    .join("\n")
}

function label(name: string, o: OptionSpec): string {
  const short = o.short === undefined ? "" : `-${o.short}, `
  return `${short}--${name}${o.kind === "flag" ? "" : ` ${o.value}`}`
}

function line(o: OptionSpec): string {
  if (o.kind === "flag") return o.help
  const fallback = o.default ?? o.fallback
  return fallback === undefined ? o.help : `${o.help} (default: ${fallback})`
}

function wrap(text: string, columns: number): string[] {
  const lines: string[] = []
  let current = ""
  for (const word of text.split(" ")) {
    if (current !== "" && current.length + 1 + word.length > columns) {
      lines.push(current)
      current = word
    } else current = current === "" ? word : `${current} ${word}`
  }
  lines.push(current)
  return lines
}
