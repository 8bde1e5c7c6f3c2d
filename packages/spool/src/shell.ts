// `spool completion bash|zsh` and `spool man`: the completion scripts and the man page, made
// from the same specs that parse every command and write its --help.
import {
  type CommandSpec,
  type CommandSpecs,
  type CompletionShell,
  completionScript,
  completionShells,
  manPage,
  runCommand,
  spoolVersion,
} from "@spool/cli"
import { ExitCode, SpoolError } from "@spool/core/engine"

/** Every command's spec, in the order `spool --help` lists them. */
async function specs(): Promise<CommandSpecs> {
  const { commands } = await import("./spool.ts")
  return Promise.all(Object.entries(commands).map(async ([n, load]) => [n, (await load()).spec] as const))
}

/** `spool completion`'s arguments and help. */
export const completionSpec = {
  name: "completion",
  usage: "spool completion bash|zsh",
  summary: "Prints the shell completion script for bash or zsh, made from every command's options.",
  description:
    "Commands, options and the values of choice options complete; DIR options complete directories,\n" +
    "FILE and PATH ones files. Regenerate it after upgrading spool.",
  arguments: [{ name: "SHELL", help: "bash or zsh", choices: completionShells }],
  options: {},
  exitCodes: [0, 2],
  examples: [
    { args: "bash > ~/.local/share/bash-completion/completions/spool", does: "install it for bash" },
    {
      args: "zsh > ~/.zsh/completions/_spool",
      does: "install it for zsh (a directory on $fpath; then start a new shell)",
    },
  ],
} satisfies CommandSpec

/** `spool completion bash|zsh`. */
export function completion(argv: readonly string[]): Promise<number> {
  return runCommand(completionSpec, argv, async ({ positionals }) => {
    const [shell, extra] = positionals
    if (shell === undefined || extra !== undefined || !(completionShells as readonly string[]).includes(shell))
      throw new SpoolError(
        "usage",
        `give one shell, ${completionShells.join(" or ")}${shell === undefined ? "" : `, not ${positionals.map((p) => JSON.stringify(p)).join(" ")}`}`,
      )
    process.stdout.write(completionScript(shell as CompletionShell, "spool", await specs()))
    return ExitCode.ok
  })
}

/** `spool man`'s options and help. */
export const manSpec = {
  name: "man",
  usage: "spool man [-q]",
  summary: "Prints spool's man page (roff), made from every command's --help.",
  options: {},
  exitCodes: [0, 2],
  examples: [
    { args: "| man -l -", does: "read it" },
    { args: "> ~/.local/share/man/man1/spool.1", does: "install it for man spool" },
  ],
} satisfies CommandSpec

/** `spool man`. */
export function man(argv: readonly string[]): Promise<number> {
  return runCommand(manSpec, argv, async () => {
    const { spool } = await import("./spool.ts")
    process.stdout.write(manPage({ program: "spool", version: spoolVersion, summary: spool.summary }, await specs()))
    return ExitCode.ok
  })
}
