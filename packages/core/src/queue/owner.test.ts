import { describe, expect, it } from "bun:test"
import { join } from "node:path"
import { currentOwner } from "./owner.ts"

/** Judges this test process's owner from a process started with `env`: what recovery there would conclude. */
async function judgedFrom(env: Record<string, string>): Promise<{ bootId: string; liveness: string }> {
  const script = `
    import { currentOwner, ownerLiveness } from ${JSON.stringify(join(import.meta.dir, "owner.ts"))}
    const owner = JSON.parse(process.argv[1])
    console.log(JSON.stringify({ bootId: currentOwner().bootId, liveness: ownerLiveness(owner) }))`
  const proc = Bun.spawn(["bun", "-e", script, JSON.stringify(currentOwner())], {
    env: { ...process.env, ...env },
    stdout: "pipe",
    stderr: "pipe",
  })
  const [out, err] = [await new Response(proc.stdout).text(), await new Response(proc.stderr).text()]
  if ((await proc.exited) !== 0) throw new Error(err)
  return JSON.parse(out)
}

describe("an owner's boot", () => {
  it("is alive from a process of the same boot while its process runs", async () => {
    expect((await judgedFrom({})).liveness).toBe("alive")
  })

  it("is dead from a process whose SPOOL_BOOT_ID says the machine has booted since", async () => {
    const judged = await judgedFrom({ SPOOL_BOOT_ID: "after-a-power-cut" })
    expect(judged.bootId).toStartWith("after-a-power-cut")
    expect(judged.liveness).toBe("dead")
  })

  it("is judged by its heartbeat from another machine of the same host name, which boots apart from it", async () => {
    const judged = await judgedFrom({ SPOOL_BOOT_ID: "its-own-boot", SPOOL_MACHINE_ID: "a-cloned-vm" })
    expect(judged.bootId).toEndWith(" a-cloned-vm")
    expect(judged.liveness).toBe("unknown")
  })

  it("refuses a SPOOL_BOOT_ID that would split from the pid namespace spool appends to it", async () => {
    await expect(judgedFrom({ SPOOL_BOOT_ID: "two words" })).rejects.toThrow("SPOOL_BOOT_ID=two words")
  })
})
