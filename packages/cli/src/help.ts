import type { OptionSpec, Options } from "./option.ts"
import { commonOptions } from "./options.ts"

/** A positional argument of a command, for its --help. */
export interface Argument {
  /** As the usage line writes it: `DIR`, `FILE...`. */
  readonly name: string
  readonly help: string
  /** The words it takes, when it takes only these (shell completion offers them). */
  readonly choices?: readonly string[]
}

/** An example at the end of --help: the arguments after the program's name, and what they do. */
export interface Example {
  readonly args: string
  readonly does: string
}

/** The exit codes a command may end with besides a signal's 128+n, as the README's table gives them. */
export type ExitStatus = 0 | 1 | 2 | 3 | 4

/** What --help shows of a command; `CommandSpec` is one. */
export interface HelpSpec {
  readonly usage: string
  readonly summary: string
  readonly description?: string
  readonly arguments?: readonly Argument[]
  readonly options: Options
  /** Every exit code the command can return: its help footer lists them, nothing else. */
  readonly exitCodes: readonly ExitStatus[]
  /** Two or three command lines that end --help. */
  readonly examples: readonly Example[]
}

const width = 110

/** What each exit code means, in the words of the README's table. */
export const exitMeanings: Readonly<Record<ExitStatus, string>> = {
  0: "ok",
  1: "check failed or refused (nothing changed)",
  2: "usage or not a queue",
  3: "runtime failure",
  4: "interrupted by a signal (run again to go on)",
}

/** The footer line: each code the command can return, then the signal's. */
export function exitCodesLine(codes: readonly ExitStatus[]): string {
  return `Exit codes: ${[...codes.map((c) => `${c} ${exitMeanings[c]}`), "128+n ended by signal n"].join(", ")}.`
}

/** The program words of a usage line: `bun run setup`, `lag.sh`, `spool`. */
export function programOf(usage: string): string {
  return /^(bun run \S+|\S+)/.exec(usage)?.[1] ?? usage
}

/** The examples section, each line the program and its arguments with what it does beneath. */
export function examplesText(examples: readonly Example[], program: string): string {
  return `Examples:\n${examples.map((e) => `  ${program} ${e.args}\n      ${e.does}`).join("\n")}`
}

/**
 * The --help text of a command, made from its spec: every option's line comes from the option
 * itself, and the options every command takes (`-q`, `--help`, `--version`) come last; then the
 * exit codes it can return and the examples.
 */
export function helpText(spec: HelpSpec, program: string = programOf(spec.usage)): string {
  const sections = [`Usage: ${spec.usage}`, spec.summary]
  if (spec.description !== undefined) sections.push(spec.description)
  if (spec.arguments !== undefined && spec.arguments.length > 0)
    sections.push(`Arguments:\n${table(spec.arguments.map((a) => [a.name, a.help]))}`)
  const options = Object.entries(commonOptions(spec.options)).map(([name, o]): [string, string] => [
    label(name, o),
    line(o),
  ])
  sections.push(`Options:\n${table(options)}`, exitCodesLine(spec.exitCodes), examplesText(spec.examples, program))
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

/** An option's help as --help and the man page give it: with its default, or what stands in for one. */
export function optionHelp(o: OptionSpec): string {
  return line(o)
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
