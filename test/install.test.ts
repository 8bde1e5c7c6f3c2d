// spool as an installed command: `bun link` in the checkout puts `spool` on the PATH, and it
// runs from any directory; its shell completion and man page come from the command specs.
// Bun's global directory is a temp BUN_INSTALL (and HOME), so the machine is left as it was.
import { beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot, requireTool, run, tempDir } from "@spool/test-support"

const version = JSON.parse(fs.readFileSync(join(repoRoot, "package.json"), "utf8")).version as string
const itWithZsh = requireTool("zsh", "apt-get install zsh")
const itWithMan = requireTool("man", "apt-get install man-db")

describe("spool installed with bun link", () => {
  let home: Awaited<ReturnType<typeof tempDir>>
  let env: Record<string, string>
  beforeAll(async () => {
    home = await tempDir()
    const bunInstall = join(home.path, ".bun")
    env = { HOME: home.path, BUN_INSTALL: bunInstall, PATH: `${join(bunInstall, "bin")}:${process.env.PATH}` }
    const link = await run(["bun", "link"], { cwd: repoRoot, env })
    expect(link.exitCode).toBe(0)
    return () => home[Symbol.asyncDispose]()
  }, 120_000)

  /** `spool ARGS` as a shell finds it on the PATH, run in a directory outside the checkout. */
  const spool = (args: string[], cwd = home.path) =>
    run(["sh", "-c", 'exec spool "$@"', "spool", ...args], { cwd, env })

  it("is on the PATH, in bun's global bin directory", async () => {
    const which = await run(["sh", "-c", "command -v spool"], { cwd: home.path, env })
    expect(which.stdout.trim()).toBe(join(home.path, ".bun", "bin", "spool"))
    const r = await spool(["--version"])
    expect(r.stdout).toBe(`spool ${version}\n`)
    expect(r.exitCode).toBe(0)
  })

  it("sets up, fills, drains and measures a queue from a directory outside the checkout", async () => {
    const root = join(home.path, "q")
    expect((await spool(["setup", "--root", root, "-q"])).exitCode).toBe(0)
    const message = join(home.path, "m.json")
    fs.writeFileSync(message, JSON.stringify({ msg_id: "m-1", order_no: "O-1", seq: 1, amount: 1 }))
    expect((await spool(["enqueue", "--root", root, "-q", message])).exitCode).toBe(0)
    const lag = await spool(["lag", "1"], root)
    expect(lag.stdout).toBe("inbox=1 processing=0 error=0\n")
    expect((await spool(["consume", "-q"], join(root, "inbox"))).exitCode).toBe(0)
    expect(fs.readdirSync(join(root, "done"))).toEqual(["m.json"])
  })

  it("completes commands, options and choices in bash from the specs", async () => {
    const complete = async (words: string[]) => {
      const script = `source <(spool completion bash); COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _spool; echo "\${COMPREPLY[*]}"`
      const r = await run(["bash", "-c", script], { cwd: home.path, env })
      expect(r.stderr).toBe("")
      return r.stdout.trim().split(" ").sort()
    }
    expect(await complete(["spool", "co"])).toEqual(["compact", "completion", "consume"])
    expect(await complete(["spool", "lag", "--warning-e"])).toEqual(["--warning-error"])
    expect(await complete(["spool", "replay", "--class", ""])).toEqual(["business", "format"])
    expect(await complete(["spool", "replay", "--reason", "pa"])).toEqual(["parse"])
    expect(await complete(["spool", "stats", "-"])).toContain("--max-duplicate-rate")
    // An argument that takes only some words offers them, not the working directory's files.
    expect(await complete(["spool", "list", "d"])).toEqual(["deferred", "done"])
    expect(await complete(["spool", "completion", ""])).toEqual(["bash", "zsh"])
  })

  itWithZsh("gives zsh a completion function that loads and registers", async () => {
    const out = join(home.path, "_spool")
    fs.writeFileSync(out, (await spool(["completion", "zsh"])).stdout)
    const r = await run(
      [
        "zsh",
        "-f",
        "-c",
        `autoload -Uz compinit && compinit -u -d ${home.path}/.zcompdump && source ${out} && print -r -- $_comps[spool]`,
      ],
      { cwd: home.path, env },
    )
    expect(r.stderr).toBe("")
    expect(r.stdout.trim()).toBe("_spool")
    expect((await run(["zsh", "-n", out])).exitCode).toBe(0)
  })

  it("refuses an unknown shell as a usage error", async () => {
    const r = await spool(["completion", "fish"])
    expect(r.stderr).toBe('completion: give one shell, bash or zsh, not "fish"\n')
    expect(r.exitCode).toBe(2)
  })

  itWithMan("prints a man page that man renders, with every command and its examples", async () => {
    const page = (await spool(["man"])).stdout
    expect(page).toStartWith(`.TH SPOOL 1 "" "spool ${version}" "User Commands"\n`)
    const r = await run(["man", "-l", "-"], { cwd: home.path, env: { ...env, MANWIDTH: "120" }, stdin: page })
    expect(r.exitCode).toBe(0)
    for (const c of ["consume", "lag", "replay", "list", "show"]) expect(r.stdout).toContain(`spool ${c}`)
    expect(r.stdout).toContain("--warning-error RANGE")
    expect(r.stdout).toContain("spool consume --root /srv/spool/orders -q")
    expect(r.stdout).toContain("EXIT STATUS")
    // As --help gives them: each option's default, each command's exit codes, the environment.
    expect(r.stdout).toMatch(/messages per ledger transaction \(default:\s+1000\)/)
    expect(r.stdout).toMatch(/Exit codes: 0 ok, 2 usage or not a queue, 3 runtime failure, 4 interrupted/)
    expect(r.stdout).toContain("ENVIRONMENT")
    expect(r.stdout).toContain("SPOOL_LEDGER_URL")
  })
})
