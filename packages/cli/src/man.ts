// A man page in roff (man(7)) made from the same specs as --help: the program's summary, then
// each command's synopsis, description, arguments, options, exit codes and examples.
import type { CommandSpec } from "./command.ts"
import type { CommandSpecs } from "./completion.ts"
import { type ExitStatus, exitCodesLine, exitMeanings, optionHelp, programOf } from "./help.ts"
import type { OptionSpec } from "./option.ts"
import { commonOptions } from "./options.ts"

/** What the page says of the program itself. */
export interface ManHeader {
  readonly program: string
  readonly version: string
  readonly summary: string
}

/** The section 1 man page of `header.program` and its commands. */
export function manPage(header: ManHeader, commands: CommandSpecs): string {
  const p = header.program
  const codes = new Set<ExitStatus>(commands.flatMap(([, s]) => s.exitCodes))
  return [
    `.TH ${p.toUpperCase()} 1 "" "${p} ${header.version}" "User Commands"`,
    ".SH NAME",
    `${p} \\- ${roff(header.summary)}`,
    ".SH SYNOPSIS",
    `.B ${p}`,
    "\\fICOMMAND\\fR [\\fIARGUMENTS\\fR] [\\fIOPTIONS\\fR]",
    ".br",
    `.B ${p} help`,
    "\\fICOMMAND\\fR",
    ".SH COMMANDS",
    ...commands.flatMap(([name, spec]) => commandSection(p, name, spec)),
    ".SH ENVIRONMENT",
    ...environment.flatMap(([name, says]) => [".TP", `.B ${name}`, roff(says)]),
    ".SH EXIT STATUS",
    ...[...codes].sort().flatMap((c) => [".TP", `.B ${c}`, roff(exitMeanings[c])]),
    ".TP",
    ".B 128+n",
    "ended by signal n",
    "",
  ].join("\n")
}

/** The variables every command reads, as docs/operating.md describes them. */
const environment = [
  ["SPOOL_ROOT", "the queue root when --root is not given (before the root the working directory is in, and ./spool)"],
  ["SPOOL_LEDGER_URL", "the PostgreSQL ledger's postgres:// URL when --ledger is not given"],
  ["NO_COLOR", "set: no colour in the logs, even on a terminal"],
  ["SPOOL_NO_READ_AHEAD", "1: consume starts no read-ahead of a batch whose files are not in memory"],
] as const

function commandSection(program: string, name: string, spec: CommandSpec): string[] {
  const own = programOf(spec.usage)
  const lines = [`.SS "${program} ${name}"`, roff(spec.summary), ".PP", ".nf"]
  for (const line of spec.usage.split("\n").map((l) => l.trim()))
    lines.push(roff(line.startsWith(`${program} ${name}`) ? line : line.replace(own, `${program} ${name}`)))
  lines.push(".fi")
  if (spec.description !== undefined) lines.push(".PP", roff(spec.description.replaceAll("\n", " ")))
  for (const a of spec.arguments ?? []) lines.push(".TP", `.I ${roff(a.name)}`, roff(a.help))
  for (const [n, o] of Object.entries(commonOptions(spec.options)))
    lines.push(".TP", optionLabel(n, o), roff(optionHelp(o)))
  lines.push(".PP", roff(exitCodesLine(spec.exitCodes)))
  for (const e of spec.examples) lines.push(".PP", ".nf", roff(`${program} ${name} ${e.args}`), ".fi", roff(e.does))
  return lines
}

function optionLabel(name: string, o: OptionSpec): string {
  const short = o.short === undefined ? "" : `\\fB\\-${o.short}\\fR, `
  return `${short}\\fB\\-\\-${roff(name)}\\fR${o.kind === "flag" ? "" : ` \\fI${o.value}\\fR`}`
}

/** Text as roff prints it: backslashes and hyphens escaped, no line starting with a control character. */
function roff(text: string): string {
  return text
    .replaceAll("\\", "\\e")
    .replaceAll("-", "\\-")
    .split("\n")
    .map((l) => (/^[.']/.test(l) ? `\\&${l}` : l))
    .join("\n")
}
