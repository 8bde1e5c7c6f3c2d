// What every part of the bench runs from: the repository root and a command run to its end.
import { spawnSync } from "node:child_process"
import { resolve } from "node:path"

export const repo = resolve(import.meta.dir, "..")

/** The command's stdout; throws with its stderr when it fails. */
export const sh = (cmd: string, args: string[]): string => {
  const r = spawnSync(cmd, args, { encoding: "utf8" })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed: ${r.stderr}`)
  return r.stdout
}
