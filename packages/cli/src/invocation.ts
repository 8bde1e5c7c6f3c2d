// How the running command was invoked. Each command's usage is written for its own entry
// point (`bun run stats`, `lag.sh`); run by a dispatcher (`spool stats`), its --help and its
// "run ... --help" hints say the dispatcher's words instead.

let invokedAs: string | undefined

/** Records the program words a dispatcher ran the command under (`spool stats`); undefined: its own entry point. */
export function setInvocation(program: string | undefined): void {
  invokedAs = program
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
