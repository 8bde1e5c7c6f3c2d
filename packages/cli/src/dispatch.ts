import { ExitCode, quoteName } from "@spool/core/engine"
import type { CommandSpec } from "./command.ts"
import { type Example, examplesText, exitCodesLine, table } from "./help.ts"
import { setInvocation } from "./invocation.ts"
import { help, version } from "./options.ts"
import { suggestion } from "./suggest.ts"
import { versionLine } from "./version.ts"

/** What a command module exports: its spec and its main. */
export interface CommandModule {
  readonly spec: CommandSpec
  main(argv: readonly string[]): Promise<number>
}

/** The subcommands of a dispatcher by name, each imported only when it is needed. */
export type CommandTable = Readonly<Record<string, () => Promise<CommandModule>>>

/** A program made of subcommands: `spool consume ...`. */
export interface DispatcherSpec {
  readonly name: string
  readonly summary: string
  readonly commands: CommandTable
  /** Two or three lines that end `NAME --help`. */
  readonly examples: readonly Example[]
}

/**
 * Runs `NAME COMMAND ARGS...` by handing ARGS to that command's main, which parses them as it
 * always does. `--help` (or `help`) lists the commands with their summaries, `help COMMAND` is
 * `COMMAND --help`, `--version` prints the version; a missing or unknown command is exit 2 with
 * the list.
 */
export async function dispatch(spec: DispatcherSpec, argv: readonly string[]): Promise<number> {
  const [first, ...rest] = argv
  if (first === "--help" || first === "-h" || (first === "help" && rest.length === 0)) {
    process.stdout.write(await dispatcherHelp(spec))
    return ExitCode.ok
  }
  if (first === "--version" || first === "-V") {
    process.stdout.write(versionLine())
    return ExitCode.ok
  }
  if (first === "help") {
    if (rest.length > 1)
      return usage(spec, `help takes one command, not ${rest.map(quoteName).join(" ")}; run ${spec.name} --help`)
    const command = commandOf(spec, rest[0] ?? "")
    if (command === undefined) return unknown(spec, rest[0] ?? "")
    setInvocation(`${spec.name} ${rest[0]}`, { name: spec.name, commands: Object.keys(spec.commands) })
    return (await command()).main(["--help"])
  }
  if (first === undefined) return unknown(spec, undefined)
  if (first.startsWith("-"))
    return usage(
      spec,
      `unknown option ${quoteName(first)}: ${spec.name} takes a command first, then its options (${spec.name} COMMAND [OPTIONS]); run ${spec.name} --help for the commands`,
    )
  const command = commandOf(spec, first)
  if (command === undefined) return unknown(spec, first)
  // Its --help and its hints then say `spool COMMAND`, as it was run.
  setInvocation(`${spec.name} ${first}`, { name: spec.name, commands: Object.keys(spec.commands) })
  return (await command()).main(rest)
}

/** The command of that name; own names only, so that "constructor" is no command. */
function commandOf(spec: DispatcherSpec, name: string): (() => Promise<CommandModule>) | undefined {
  return Object.hasOwn(spec.commands, name) ? spec.commands[name] : undefined
}

/** `NAME --help`: the usage, then every command and its one-line summary, read from its spec. */
export async function dispatcherHelp(spec: DispatcherSpec): Promise<string> {
  return [
    `Usage: ${spec.name} COMMAND [ARGUMENTS] [OPTIONS]\n       ${spec.name} help COMMAND`,
    spec.summary,
    `Commands:\n${await commandList(spec)}`,
    `Options:\n${table([
      [`-${help.short}, --help`, help.help],
      [`-${version.short}, --version`, version.help],
    ])}`,
    `Run ${spec.name} help COMMAND (or ${spec.name} COMMAND --help) for a command's arguments and options.`,
    `${exitCodesLine([0, 1, 2, 3, 4])} COMMAND --help lists the ones it can return.`,
    examplesText(spec.examples, spec.name),
  ]
    .join("\n\n")
    .concat("\n")
}

async function commandList(spec: DispatcherSpec): Promise<string> {
  const names = Object.keys(spec.commands)
  const modules = await Promise.all(names.map((n) => spec.commands[n]?.()))
  return table(names.map((n, i): [string, string] => [n, modules[i]?.spec.summary ?? ""]))
}

async function unknown(spec: DispatcherSpec, name: string | undefined): Promise<number> {
  const near = name === undefined ? undefined : suggestion(name, Object.keys(spec.commands))
  const what =
    name === undefined
      ? "give a command"
      : `unknown command ${quoteName(name)}${near === undefined ? "" : ` (did you mean ${near}?)`}`
  process.stderr.write(
    `${spec.name}: ${what}; the commands are:\n${await commandList(spec)}\nRun ${spec.name} help COMMAND for a command's arguments and options.\n`,
  )
  return ExitCode.usage
}

function usage(spec: DispatcherSpec, message: string): number {
  process.stderr.write(`${spec.name}: ${message}\n`)
  return ExitCode.usage
}
