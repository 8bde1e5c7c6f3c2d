// argv into option texts and positionals, with spool's own messages for what node:util's
// parseArgs refuses: its texts name the option in quotes and say nothing of what to do.
import { type ParseArgsConfig, parseArgs } from "node:util"
import { quoteName } from "@spool/core/engine"
import type { OptionSpec, Options } from "./option.ts"
import { suggestion } from "./suggest.ts"

/** The texts of the options given (a list for a `multiple` one) and the positional arguments. */
export interface RawArgs {
  readonly values: Readonly<Record<string, string | true | string[]>>
  readonly positionals: readonly string[]
}

/** An argument list the options do not take, and the words that say why. */
export class ArgvProblem extends Error {
  override readonly name = "ArgvProblem"
}

/**
 * Reads `argv` against `options`. A negative number standing alone (`lag Q -1`) is a positional
 * argument, which the command then judges as a value, since no option is named by digits.
 * Throws an ArgvProblem for the first thing the options do not take, unless --help or --version
 * was given (they win, so a user with a wrong line can still ask for help).
 */
export function readArgv(options: Options, argv: readonly string[], argumentName?: string): RawArgs {
  const args = [...argv]
  const { tokens } = parseArgs({
    args,
    options: parseArgsOptions(options),
    allowPositionals: true,
    strict: false,
    tokens: true,
  })
  const values: Record<string, string | true | string[]> = {}
  const positionals: string[] = []
  let problem: string | undefined
  let negativeAt = -1
  // A group of short options with a letter no option has (`-hourly.json`, a name meant as an
  // argument) counts for none of its letters: its -h must not print help and exit 0.
  const badGroups = new Set<number>()
  for (const t of tokens) {
    if (t.kind !== "option" || Object.hasOwn(options, t.name)) continue
    const arg = args[t.index] ?? ""
    if (!arg.startsWith("--") && arg.length > 2 && !isNegativeNumber(arg)) badGroups.add(t.index)
  }
  for (const t of tokens) {
    if (t.kind === "option-terminator") continue
    if (t.kind === "positional") {
      positionals.push(t.value)
      continue
    }
    const arg = args[t.index] ?? t.rawName
    if (isNegativeNumber(arg)) {
      // "-1.5" comes as three short options of one argument: keep the argument once.
      if (negativeAt !== t.index) positionals.push(arg)
      negativeAt = t.index
      continue
    }
    // Own names only: "--constructor" must not find Object.prototype's.
    const option = Object.hasOwn(options, t.name) ? options[t.name] : undefined
    const why =
      option === undefined
        ? unknownOption(options, t.name, t.rawName, arg, argumentName)
        : valueProblem(option, t.rawName, t.value, t.inlineValue, options)
    if (why !== undefined) {
      problem ??= why
      continue
    }
    if (badGroups.has(t.index)) continue
    if (option?.kind === "flag") values[t.name] = true
    else if (option?.multiple === true)
      values[t.name] = [...((values[t.name] as string[] | undefined) ?? []), String(t.value)]
    else values[t.name] = String(t.value)
  }
  if (problem !== undefined && values.help !== true && values.version !== true) throw new ArgvProblem(problem)
  return { values, positionals }
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

function isNegativeNumber(arg: string): boolean {
  return /^-\d+(\.\d+)?$/.test(arg)
}

function unknownOption(
  options: Options,
  name: string,
  rawName: string,
  arg: string,
  argumentName: string | undefined,
): string {
  // A short option inside a group (-qz) is named with its group; a group whose first letter is
  // no option (-1.json) is named whole, as it is most likely not meant as options at all.
  const isLong = arg.startsWith("--")
  const shown =
    isLong || arg[1] === name ? quoteName(isLong ? rawName : arg) : `${quoteName(rawName)} in ${quoteName(arg)}`
  const near = isLong ? suggestion(name, Object.keys(options)) : undefined
  const hint = near === undefined ? "" : ` (did you mean --${near}?)`
  const dash = argumentName === undefined || isLong ? "" : `; put -- before a ${argumentName} that starts with -`
  return `unknown option ${shown}${hint}${dash}`
}

function valueProblem(
  option: OptionSpec,
  rawName: string,
  value: string | undefined,
  isInline: boolean | undefined,
  options: Options,
): string | undefined {
  if (option.kind === "flag")
    return value === undefined
      ? undefined
      : `${rawName} is a flag and takes no value: write ${rawName}, not ${quoteName(`${rawName}=${value}`)}`
  if (value === undefined) return `${rawName} needs a value (${option.value})`
  // parseArgs takes the next argument as the value, whatever it is: "--root --json" would make
  // "--json" the root. A value that starts with a dash must be written inline to be taken.
  if (isInline === true || !value.startsWith("-") || value.length === 1) return undefined
  if (/^-\d/.test(value))
    return `${rawName} takes ${option.value}, not the negative ${isNegativeNumber(value) ? "number" : "value"} ${value}`
  const next = value.startsWith("--") ? value.slice(2).split("=")[0] : undefined
  if (next !== undefined && Object.hasOwn(options, next))
    return `${rawName} needs a value (${option.value}) before ${value}`
  return `${rawName} needs a value (${option.value}); to give one that starts with -, write ${quoteName(`${rawName}=${value}`)}`
}
