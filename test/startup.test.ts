// What a consume run loads before it has work: the validator (arktype, which builds its whole
// keyword scope at import, about 0.2 s) only when there is a message to judge. A preloaded
// plugin stops the process the moment arktype's entry module loads, so these tests see what is
// imported, not how long anything takes.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot, run, tempDir, tempQueue } from "./support.ts"

const denyArktype = `Bun.plugin({
  name: "deny-arktype",
  setup(build) {
    build.onLoad({ filter: /arktype[\\\\/]out[\\\\/]index\\.js$/ }, () => {
      process.stderr.write("arktype was imported\\n")
      process.exit(99)
    })
  },
})
`

async function consumeWithoutArktype(root: string, args: string[] = []) {
  await using d = await tempDir()
  const preload = join(d.path, "deny-arktype.ts")
  fs.writeFileSync(preload, denyArktype)
  return await run([
    "bun",
    "--preload",
    preload,
    join(repoRoot, "packages/consumer/bin/consume.ts"),
    "--root",
    root,
    ...args,
  ])
}

describe("consume's start-up", () => {
  it("does not import the validator when inbox/ is empty", async () => {
    await using q = await tempQueue()
    const r = await consumeWithoutArktype(q.root)
    expect(r.stderr).not.toContain("arktype was imported")
    expect(r.exitCode).toBe(0)
    expect(fs.existsSync(join(q.root, "dup.txt"))).toBe(true)
  })

  it("imports it for the first message (the plugin that forbids it stops the run)", async () => {
    await using q = await tempQueue({ seed: { "a.json": { msg_id: "a", order_no: "o", seq: 1, amount: 1 } } })
    const r = await consumeWithoutArktype(q.root)
    expect(r.stderr).toContain("arktype was imported")
    expect(r.exitCode).toBe(99)
    // A normal run then finds the claim of the stopped one and finishes the message.
    const again = await run(["bun", join(repoRoot, "packages/consumer/bin/consume.ts"), "--root", q.root, "-q"])
    expect(again.exitCode).toBe(0)
    expect(fs.readdirSync(join(q.root, "done"))).toEqual(["a.json"])
  })
})
