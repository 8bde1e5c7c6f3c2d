// The console's replay and delete: the form turned into the command's own arguments, and the
// command run as `spool replay` or `spool delete` would run, in a process of its own.
import { fileURLToPath } from "node:url"
import { quoteName, SpoolError } from "@spool/core/engine"
import type { Source } from "./read.ts"

/** What a replay or delete form asks for. */
export interface Operation {
  readonly command: "replay" | "delete"
  /** `selected`: the named files; `all`: every file in error/ (replay only); or by reason or class. */
  readonly scope: "selected" | "all" | "reason" | "class"
  readonly files: readonly string[]
  readonly value: string | undefined
  readonly isDryRun: boolean
}

/** What the command did: its arguments as a person would type them, its output and its exit code. */
export interface Operated {
  readonly line: string
  readonly exitCode: number
  readonly stdout: string
  readonly stderr: string
}

const entry = fileURLToPath(new URL("../bin/operate.ts", import.meta.url))

/** Reads an operation from a posted form; a usage error says which field is wrong. */
export function operationOf(command: string, form: Record<string, string | File | (string | File)[]>): Operation {
  if (command !== "replay" && command !== "delete")
    throw new SpoolError("usage", `the console replays or deletes, not ${quoteName(command)}`)
  const scope = String(form.scope ?? "selected")
  if (scope !== "selected" && scope !== "all" && scope !== "reason" && scope !== "class")
    throw new SpoolError("usage", `scope is selected, all, reason or class, not ${quoteName(scope)}`)
  if (scope === "all" && command === "delete")
    throw new SpoolError("usage", "delete takes no --all: select the files, or a reason or class")
  const given = form.file
  const files = (Array.isArray(given) ? given : given === undefined ? [] : [given]).map(String)
  if (scope === "selected" && files.length === 0) throw new SpoolError("usage", "select at least one file")
  const value = typeof form.value === "string" && form.value !== "" ? form.value : undefined
  if ((scope === "reason" || scope === "class") && value === undefined)
    throw new SpoolError("usage", `give the ${scope} to select by`)
  return { command, scope, files, value, isDryRun: form.dry === "1" }
}

/** The command's arguments after its name, as the CLI takes them. */
export function argsOf(op: Operation): string[] {
  const selection =
    op.scope === "selected" ? ["--", ...op.files] : op.scope === "all" ? ["--all"] : [`--${op.scope}`, op.value ?? ""]
  return [...(op.isDryRun ? ["--dry-run"] : []), ...selection]
}

/** Runs the operation on the source's root; the ledger's URL goes in the environment, not in `ps`. */
export async function operate(source: Source, op: Operation): Promise<Operated> {
  const args = argsOf(op)
  const proc = Bun.spawn([process.execPath, entry, op.command, "--root", source.root, ...args], {
    env: { ...process.env, NO_COLOR: "1", SPOOL_LEDGER_URL: source.url ?? "" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ])
  return { line: ["spool", op.command, ...args.map(quoteName)].join(" "), exitCode, stdout, stderr }
}
