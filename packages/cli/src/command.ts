import { type ParseArgsConfig, parseArgs } from "node:util"
import { ExitCode, exitCodeFor, SpoolError } from "@spool/core/engine"
import { type Argument, helpText } from "./help.ts"
import { type Options, parseValue, type Values } from "./option.ts"
import { help, version } from "./options.ts"
import { versionLine } from "./version.ts"

/** A command's description, from which its argument parsing and its --help text both come. */
export interface CommandSpec<O extends Options = Options> {
  readonly name: string
  /** The synopsis after `Usage: `. */
  readonly usage: string
  /** One line: what the command does. */
  readonly summary: string
  /** The rest of --help's prose, when one line is not enough. */
  readonly description?: string
  /** The positional arguments; a command without them refuses any. */
  readonly arguments?: readonly Argument[]
  readonly options: O
}

/** What a command body gets: its options parsed, and the positional arguments. */
export interface Parsed<O extends Options> {
  readonly values: Values<O>
  /** Each value option's text, as given or as its default, for output that repeats it. */
  readonly texts: { readonly [K in keyof O]?: string }
  readonly positionals: readonly string[]
}

/**
 * Runs a command body with spool's conventions: strict argument parsing, `--help`, `--version`,
 * SpoolErrors printed as one clear line on stderr and turned into the README's exit codes.
 */
export async function runCommand<O extends Options>(
  spec: CommandSpec<O>,
  argv: readonly string[],
  body: (args: Parsed<O>) => Promise<number> | number,
): Promise<number> {
  const all: Options = { ...spec.options, help, version }
  let raw: { values: Record<string, string | boolean | (string | boolean)[] | undefined>; positionals: string[] }
  try {
    raw = parseArgs({ args: [...argv], options: parseArgsOptions(all), allowPositionals: true, strict: true })
  } catch (error) {
    process.stderr.write(
      `${spec.name}: ${error instanceof Error ? error.message : String(error)}\nRun with --help for usage.\n`,
    )
    return ExitCode.usage
  }
  if (raw.values.help === true) {
    process.stdout.write(helpText(spec))
    return ExitCode.ok
  }
  if (raw.values.version === true) {
    process.stdout.write(versionLine())
    return ExitCode.ok
  }
  if (spec.arguments === undefined && raw.positionals.length > 0) {
    process.stderr.write(
      `${spec.name}: unexpected argument ${JSON.stringify(raw.positionals[0])}\nRun with --help for usage.\n`,
    )
    return ExitCode.usage
  }
  try {
    return await body({ ...parseValues(spec.options, raw.values), positionals: raw.positionals })
  } catch (error) {
    if (error instanceof SpoolError) {
      process.stderr.write(`${spec.name}: ${error.message}\n`)
      return exitCodeFor(error)
    }
    process.stderr.write(
      `${spec.name}: unexpected failure: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    )
    return ExitCode.failure
  }
}

type ParseArgsOptions = NonNullable<ParseArgsConfig["options"]>

function parseArgsOptions(options: Options): ParseArgsOptions {
  const out: ParseArgsOptions = {}
  for (const [name, o] of Object.entries(options))
    out[name] = {
      type: o.kind === "flag" ? "boolean" : "string",
      ...(o.short !== undefined && { short: o.short }),
      ...(o.kind !== "flag" && o.multiple === true && { multiple: true }),
    }
  return out
}

/** Each option's value from its text (given, else its default); a text it does not take is a usage error. */
function parseValues<O extends Options>(
  options: O,
  raw: Record<string, unknown>,
): { values: Values<O>; texts: Parsed<O>["texts"] } {
  const values: Record<string, unknown> = {}
  const texts: Record<string, string> = {}
  for (const [name, o] of Object.entries(options)) {
    const given = raw[name]
    if (o.kind === "flag") {
      values[name] = given === true
      continue
    }
    const text = typeof given === "string" ? given : given === undefined ? o.default : undefined
    if (Array.isArray(given)) values[name] = given.map((t) => parseValue(name, o, String(t)))
    else if (text !== undefined) {
      values[name] = parseValue(name, o, text)
      texts[name] = text
    }
  }
  return { values: values as Values<O>, texts: texts as Parsed<O>["texts"] }
}
