// How the running command was invoked. Each command's usage is written for its own entry
// point (`bun run stats`, `lag.sh`); run by a dispatcher (`spool stats`), its --help and its
// "run ... --help" hints say the dispatcher's words instead.

let invokedAs: string | undefined
let dispatcher: { readonly name: string; readonly commands: ReadonlySet<string> } | undefined

/**
 * Records the program words a dispatcher ran the command under (`spool stats`), and the
 * dispatcher's name and commands (see inInvokedWords); undefined: its own entry point.
 */
export function setInvocation(
  program: string | undefined,
  by?: { readonly name: string; readonly commands: Iterable<string> },
): void {
  invokedAs = program
  dispatcher = by === undefined ? undefined : { name: by.name, commands: new Set(by.commands) }
}

/**
 * `message` in the words of the program it was invoked under: run by a dispatcher, a hint such
 * as `bun run setup --root R` (the words of the checkout's scripts, which the library's errors
 * use) names the dispatcher's command instead, `spool setup --root R`, which runs from any
 * directory. Other `bun run` words (scripts the dispatcher has no command for) stay.
 */
export function inInvokedWords(message: string): string {
  const by = dispatcher
  if (by === undefined) return message
  return message.replace(/\bbun run ([a-z][a-z-]*)\b/g, (words, command: string) =>
    by.commands.has(command) ? `${by.name} ${command}` : words,
  )
}

/** The program words the running command was invoked under, if a dispatcher ran it. */
export function invocation(): string | undefined {
  return invokedAs
}

/**
 * `usage` with each spelling of the command `name` as a program (`bun run NAME`, `NAME.sh`,
 * at the start of a line or after an alternative's `|`) replaced by `program`, and the lines
 * that continue a synopsis shifted to stay aligned under it.
 */
export function usageAs(usage: string, name: string, program: string): string {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
  const spelling = new RegExp(`(^\\s*|\\|\\s+)(bun run ${escaped}|${escaped}\\.sh)(?= |$)`, "g")
  let shift = 0
  return usage
    .split("\n")
    .map((line) => {
      const first = new RegExp(spelling.source).exec(line)
      if (first === null || first.index !== 0) {
        // A continuation line: as far right of the program words as before.
        if (shift >= 0) return " ".repeat(shift) + line
        return line.slice(Math.min(-shift, line.length - line.trimStart().length))
      }
      shift = program.length - (first[2] as string).length
      return line.replace(spelling, (_, lead: string) => `${lead}${program}`)
    })
    .join("\n")
}
