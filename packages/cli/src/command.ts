import { ExitCode, exitCodeFor, quoteName, SpoolError } from "@spool/core/engine"
import { ArgvProblem, type RawArgs, readArgv } from "./_parse.ts"
import { type Argument, type Example, type ExitStatus, helpText, programOf } from "./help.ts"
import { inInvokedWords, invocation, usageAs } from "./invocation.ts"
import { type Options, parseValue, type Values } from "./option.ts"
import { commonOptions } from "./options.ts"
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
  /** Every exit code the command can return besides a signal's; its help footer lists them. */
  readonly exitCodes: readonly ExitStatus[]
  /** Two or three examples, the arguments after the program's name; they end --help. */
  readonly examples: readonly Example[]
}

/** What a command body gets: its options parsed, and the positional arguments. */
export interface Parsed<O extends Options> {
  readonly values: Values<O>
  /** Each value option's text, as given or as its default, for output that repeats it. */
  readonly texts: { readonly [K in keyof O]?: string }
  readonly positionals: readonly string[]
  /** `-q`: the command prints nothing when it succeeds, only what needs a person. */
  readonly quiet: boolean
}

/** How a command reports a failure instead of the default `NAME: message` line on stderr. */
export interface RunOptions {
  /**
   * Called with the failure's message (without the command's name) and the exit code the README
   * gives it; writes what the reader expects and returns the exit code to end with. A monitoring
   * plugin reports every failure as one UNKNOWN line on stdout, exit 3.
   */
  readonly onFailure?: (message: string, code: number) => number | Promise<number>
}

/**
 * Runs a command body with spool's conventions: strict argument parsing, with one line that names
 * what is wrong and says what to do; `--help`, `--version`; SpoolErrors printed as one clear line
 * on stderr and turned into the README's exit codes.
 */
export async function runCommand<O extends Options>(
  spec: CommandSpec<O>,
  argv: readonly string[],
  body: (args: Parsed<O>) => Promise<number> | number,
  options: RunOptions = {},
): Promise<number> {
  const all = commonOptions(spec.options)
  const fail = (said: string, code: number) => {
    const message = inInvokedWords(said)
    if (options.onFailure !== undefined) return options.onFailure(message, code)
    process.stderr.write(`${spec.name}: ${message}\n`)
    return code
  }
  const program = invocation()
  const usage = (problem: string) =>
    fail(`${problem}; run ${program ?? programOf(spec.usage)} --help for the options`, ExitCode.usage)
  let raw: RawArgs
  try {
    raw = readArgv(all, argv, spec.arguments?.[0]?.name.replace(/\.\.\.$/, ""))
  } catch (error) {
    if (error instanceof ArgvProblem) return usage(error.message)
    throw error
  }
  if (raw.values.help === true) {
    process.stdout.write(
      program === undefined
        ? helpText(spec)
        : helpText({ ...spec, usage: usageAs(spec.usage, spec.name, program) }, program),
    )
    return ExitCode.ok
  }
  if (raw.values.version === true) {
    process.stdout.write(versionLine())
    return ExitCode.ok
  }
  if (spec.arguments === undefined && raw.positionals.length > 0)
    return usage(`unexpected argument ${quoteName(raw.positionals[0] ?? "")}: ${spec.name} takes no arguments`)
  try {
    return await body({
      ...parseValues(spec.options, raw.values),
      positionals: raw.positionals,
      quiet: raw.values.quiet === true,
    })
  } catch (error) {
    if (error instanceof SpoolError) return await fail(error.message, exitCodeFor(error))
    // The reader of the output went away (`spool list | head`): it had what it wanted.
    if ((error as NodeJS.ErrnoException | undefined)?.code === "EPIPE") return ExitCode.ok
    return await fail(
      `unexpected failure: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
      ExitCode.failure,
    )
  }
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
