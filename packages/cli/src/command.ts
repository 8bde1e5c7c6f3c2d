import { type ParseArgsConfig, parseArgs } from "node:util"
import { ExitCode, exitCodeFor, SpoolError } from "@spool/core/engine"

type Options = NonNullable<ParseArgsConfig["options"]>

/** A command's description, from which its --help text and argument parsing both come. */
export interface CommandSpec<O extends Options> {
  readonly name: string
  readonly usage: string
  readonly summary: string
  readonly options: O
  /** One line per option and positional, shown under "Options:". */
  readonly help: readonly string[]
  readonly allowPositionals?: boolean
}

/**
 * Runs a command body with spool's conventions: strict argument parsing, `--help`,
 * SpoolErrors printed as one clear line on stderr and turned into the README's exit codes.
 */
export async function runCommand<O extends Options>(
  spec: CommandSpec<O>,
  argv: readonly string[],
  body: (
    args: ReturnType<typeof parseArgs<{ options: O; allowPositionals: true; strict: true }>>,
  ) => Promise<number> | number,
): Promise<number> {
  let args: ReturnType<typeof parseArgs<{ options: O; allowPositionals: true; strict: true }>>
  try {
    args = parseArgs({
      args: [...argv],
      options: { ...spec.options, help: { type: "boolean", short: "h" } } as O,
      allowPositionals: true,
      strict: true,
    })
  } catch (error) {
    process.stderr.write(
      `${spec.name}: ${error instanceof Error ? error.message : String(error)}\nRun with --help for usage.\n`,
    )
    return ExitCode.usage
  }
  if ((args.values as Record<string, unknown>).help) {
    process.stdout.write(helpText(spec))
    return ExitCode.ok
  }
  if (!spec.allowPositionals && args.positionals.length > 0) {
    process.stderr.write(
      `${spec.name}: unexpected argument ${JSON.stringify(args.positionals[0])}\nRun with --help for usage.\n`,
    )
    return ExitCode.usage
  }
  try {
    return await body(args)
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

/** The --help text of a command. */
export function helpText(spec: CommandSpec<Options>): string {
  return `Usage: ${spec.usage}\n\n${spec.summary}\n\nOptions:\n${[...spec.help, "-h, --help            show this help"].map((l) => `  ${l}`).join("\n")}\n\nExit codes: 0 ok, 1 check failed or refused (nothing changed), 2 usage or not a queue, 3 runtime failure.\n`
}

/** Parses a size such as `1048576`, `512k`, `1m`, `2g` into bytes. */
export function parseBytes(text: string, flag: string): number {
  const m = /^(\d+)([kmg]i?b?)?$/i.exec(text.trim())
  if (!m) throw new SpoolError("usage", `${flag} takes a size such as 1048576, 512k or 1m, not ${JSON.stringify(text)}`)
  const unit = (m[2] ?? "").toLowerCase()[0]
  const mult = unit === "k" ? 1024 : unit === "m" ? 1024 ** 2 : unit === "g" ? 1024 ** 3 : 1
  return Number(m[1]) * mult
}

/** Parses a duration such as `500ms`, `30s`, `5m`, `2h`, `90d` into milliseconds. */
export function parseDuration(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim())
  if (!m)
    throw new SpoolError(
      "usage",
      `${flag} takes a duration such as 500ms, 30s, 5m, 2h or 90d, not ${JSON.stringify(text)}`,
    )
  const mult = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] ?? "s"] ?? 1000
  return Number(m[1]) * mult
}

/** Parses a whole number option within bounds. */
export function parseInteger(text: string, flag: string, min = 0): number {
  if (!/^\d+$/.test(text.trim()) || Number(text) < min)
    throw new SpoolError("usage", `${flag} takes a whole number >= ${min}, not ${JSON.stringify(text)}`)
  return Number(text)
}
