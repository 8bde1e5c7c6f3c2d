import { expect, it } from "bun:test"
import fs from "node:fs"
import { childPids } from "./process.ts"

it("childPids finds a process's children and not its grandchildren", async () => {
  const sh = Bun.spawn(["sh", "-c", "sleep 1000 & sleep 1000 & wait"], { stdout: "ignore", stderr: "ignore" })
  try {
    // A child is listed from its fork on, but its command line is sleep's only once it has
    // exec'd: empty or the shell's before that.
    const cmdline = (pid: number) => fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
    const isSleeping = (pids: number[]) =>
      pids.length === 2 && pids.every((pid) => cmdline(pid) === "sleep\u00001000\u0000")
    let children: number[] = []
    for (let i = 0; i < 1000 && !isSleeping(children); i++) {
      children = childPids(sh.pid)
      if (!isSleeping(children)) await Bun.sleep(10)
    }
    expect(children).toHaveLength(2)
    for (const pid of children) expect(cmdline(pid)).toBe("sleep\u00001000\u0000")
    expect(childPids(process.pid)).toContain(sh.pid)
    expect(childPids(process.pid)).not.toContain(children[0])
  } finally {
    for (const pid of childPids(sh.pid)) process.kill(pid, "SIGKILL")
    sh.kill("SIGKILL")
  }
})
