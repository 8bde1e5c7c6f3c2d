// Shell completion scripts made from the same specs that parse the commands and write their
// --help: a new option or choice completes as soon as it exists.
import type { CommandSpec } from "./command.ts"
import type { OptionSpec, Options } from "./option.ts"
import { commonOptions } from "./options.ts"

/** The shells a completion script is written for. */
export const completionShells = ["bash", "zsh"] as const
export type CompletionShell = (typeof completionShells)[number]

/** A program's subcommands with their specs, in the order its --help lists them. */
export type CommandSpecs = readonly (readonly [string, CommandSpec])[]

/** The completion script of `program` for `shell`, to be sourced or put on the shell's completion path. */
export function completionScript(shell: CompletionShell, program: string, commands: CommandSpecs): string {
  return shell === "bash" ? bashScript(program, commands) : zshScript(program, commands)
}

/** What a value option completes to: its choices, directories, files, or nothing (free text). */
function valueKind(o: OptionSpec): { choices: readonly string[] } | "dir" | "file" | "none" {
  if (o.kind === "flag") return "none"
  if (o.kind === "choice") return { choices: o.choices ?? [] }
  if (o.value === "DIR") return "dir"
  if (o.value === "PATH" || o.value === "FILE") return "file"
  return "none"
}

function flagsOf(options: Options): string[] {
  return Object.entries(options).flatMap(([n, o]) => (o.short === undefined ? [`--${n}`] : [`-${o.short}`, `--${n}`]))
}

function bashScript(program: string, commands: CommandSpecs): string {
  const fn = `_${program.replace(/\W/g, "_")}`
  const branches = commands.map(([name, spec]) => {
    const all = commonOptions(spec.options)
    const values = Object.entries(all).flatMap(([n, o]) => {
      const kind = valueKind(o)
      if (o.kind === "flag") return []
      const words = [`--${n}`, ...(o.short === undefined ? [] : [`-${o.short}`])].join("|")
      const reply =
        kind === "dir"
          ? `COMPREPLY=($(compgen -d -- "$cur"))`
          : kind === "file"
            ? `COMPREPLY=($(compgen -f -- "$cur"))`
            : typeof kind === "object"
              ? `COMPREPLY=($(compgen -W "${kind.choices.join(" ")}" -- "$cur"))`
              : "COMPREPLY=()"
      return [`        ${words}) ${reply}; return ;;`]
    })
    return [
      `    ${name})`,
      `      case "$prev" in`,
      ...values,
      "      esac",
      `      if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "${flagsOf(all).join(" ")}" -- "$cur")); else ${positionalReply(spec)}; fi`,
      "      ;;",
    ].join("\n")
  })
  return `# bash completion for ${program}, generated from its command specs (${program} completion bash)
${fn}() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  if (( COMP_CWORD == 1 )); then
    COMPREPLY=($(compgen -W "${commands.map(([n]) => n).join(" ")} help --help --version" -- "$cur"))
    return
  fi
  case "\${COMP_WORDS[1]}" in
    help) COMPREPLY=($(compgen -W "${commands.map(([n]) => n).join(" ")}" -- "$cur")) ;;
${branches.join("\n")}
  esac
}
complete -o filenames -F ${fn} ${program}
`
}

/** What a command's arguments complete to: the words its first argument takes, else file names. */
function positionalReply(spec: CommandSpec): string {
  const choices = spec.arguments?.[0]?.choices
  return choices === undefined
    ? `COMPREPLY=($(compgen -f -- "$cur"))`
    : `COMPREPLY=($(compgen -W "${choices.join(" ")}" -- "$cur"))`
}

/** Text inside a zsh `'...'` word that is also an _arguments or _describe spec: no quote, bracket or colon unescaped. */
function zshText(text: string): string {
  return text.replaceAll("'", "'\\''").replaceAll("[", "\\[").replaceAll("]", "\\]").replaceAll(":", "\\:")
}

function zshOption(name: string, o: OptionSpec): string {
  const help = zshText(o.help.split(/[;(]/)[0]?.trim() ?? "")
  const kind = valueKind(o)
  const action =
    o.kind === "flag"
      ? ""
      : `:${o.value}:${kind === "dir" ? "_files -/" : kind === "file" ? "_files" : typeof kind === "object" ? `(${kind.choices.join(" ")})` : " "}`
  const repeat = o.kind !== "flag" && o.multiple === true ? "*" : ""
  if (o.short === undefined) return `'${repeat}--${name}[${help}]${action}'`
  return `'${repeat}(-${o.short} --${name})'{-${o.short},--${name}}'[${help}]${action}'`
}

function zshScript(program: string, commands: CommandSpecs): string {
  const fn = `_${program.replace(/\W/g, "_")}`
  const described = commands.map(([n, s]) => `    '${n}:${zshText(s.summary)}'`).join("\n")
  const branches = commands.map(([name, spec]) => {
    const options = Object.entries(commonOptions(spec.options)).map(([n, o]) => `        ${zshOption(n, o)}`)
    const choices = spec.arguments?.[0]?.choices
    const argument = choices === undefined ? "_files" : `(${choices.join(" ")})`
    return `    ${name})\n      _arguments -s \\\n${options.join(" \\\n")} \\\n        '*:argument:${argument}' ;;`
  })
  return `#compdef ${program}
# zsh completion for ${program}, generated from its command specs (${program} completion zsh)
${fn}() {
  local -a commands
  commands=(
${described}
  )
  if (( CURRENT == 2 )); then
    _describe command commands
    return
  fi
  local cmd=\${words[2]}
  shift words
  (( CURRENT-- ))
  case $cmd in
    help) _describe command commands ;;
${branches.join("\n")}
  esac
}
# Autoloaded from $fpath, run it; sourced, register it.
if [[ \${zsh_eval_context[-1]} == loadautofunc ]]; then ${fn} "$@"; else compdef ${fn} ${program}; fi
`
}
