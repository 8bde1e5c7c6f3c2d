import { expect, it } from "bun:test"
import fs from "node:fs"
import { childPids } from "./process.ts"

it("childPids finds a process's children and not its grandchildren", async () => {
  const sh = Bun.spawn(["sh", "-c", "sleep 1000 & sleep 1000 & wait"], { stdout: "ignore", stderr: "ignore" })
  try {
    let children: number[] = []
    for (let i = 0; i < 1000 && children.length < 2; i++) {
      children = childPids(sh.pid)
      if (children.length < 2) await Bun.sleep(10)
    }
    expect(children).toHaveLength(2)
    for (const pid of children) expect(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")).toBe("sleep\u00001000\u0000")
    expect(childPids(process.pid)).toContain(sh.pid)
    expect(childPids(process.pid)).not.toContain(children[0])
  } finally {
    for (const pid of childPids(sh.pid)) process.kill(pid, "SIGKILL")
    sh.kill("SIGKILL")
  }
})
