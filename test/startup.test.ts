// What a consume run loads. The validator (@ark/schema, whose import builds its intrinsic
// nodes) only when there is a message to judge; arktype itself (which builds and compiles its
// whole keyword scope at import: about 0.4 s and over 40 MB) never, since spool's rules are
// an @ark/schema node. A preloaded plugin stops the process the moment a denied module loads,
// so these tests see what is imported, not how long anything takes.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot, run, tempDir, tempQueue } from "@spool/test-support"

/** A module's entry file, as the plugin's filter matches it. */
const entries = {
  arktype: String.raw`arktype[\\/]out[\\/]index\.js$`,
  "@ark/schema": String.raw`@ark[\\/]schema[\\/]out[\\/]index\.js$`,
}

const deny = (module: keyof typeof entries) => `Bun.plugin({
  name: "deny",
  setup(build) {
    build.onLoad({ filter: new RegExp(${JSON.stringify(entries[module])}) }, () => {
      process.stderr.write(${JSON.stringify(`${module} was imported\n`)})
      process.exit(99)
    })
  },
})
`

/** Runs `args` with bun, stopped the moment it imports `module`. */
async function runDenying(module: keyof typeof entries, args: string[]) {
  await using d = await tempDir()
  const preload = join(d.path, "deny.ts")
  fs.writeFileSync(preload, deny(module))
  return await run(["bun", "--preload", preload, ...args])
}

function consumeDenying(module: keyof typeof entries, root: string) {
  return runDenying(module, [join(repoRoot, "packages/consumer/bin/consume.ts"), "--root", root])
}

const spoolBin = join(repoRoot, "packages/spool/bin/spool.ts")

const message = (id: string) => ({ msg_id: id, order_no: "o", seq: 1, amount: 1 })

describe("consume's start-up", () => {
  it("does not import the validator when inbox/ is empty", async () => {
    await using q = await tempQueue()
    const r = await consumeDenying("@ark/schema", q.root)
    expect(r.stderr).not.toContain("was imported")
    expect(r.exitCode).toBe(0)
    expect(fs.existsSync(join(q.root, "dup.txt"))).toBe(true)
  })

  it("imports it for the first message (the plugin that forbids it stops the run)", async () => {
    await using q = await tempQueue({ seed: { "a.json": message("a") } })
    const r = await consumeDenying("@ark/schema", q.root)
    expect(r.stderr).toContain("@ark/schema was imported")
    expect(r.exitCode).toBe(99)
    // A normal run then finds the claim of the stopped one and finishes the message.
    const again = await run(["bun", join(repoRoot, "packages/consumer/bin/consume.ts"), "--root", q.root, "-q"])
    expect(again.exitCode).toBe(0)
    expect(fs.readdirSync(join(q.root, "done"))).toEqual(["a.json"])
  })

  it("never imports arktype, whatever it judges", async () => {
    await using q = await tempQueue({
      seed: { "a.json": message("a"), "b.json": message("a"), "c.json": { ...message("c"), seq: 0 }, "d.json": "{no" },
    })
    const r = await consumeDenying("arktype", q.root)
    expect(r.stderr).not.toContain("was imported")
    expect(r.exitCode).toBe(0)
    expect(fs.readdirSync(join(q.root, "done")).sort()).toEqual(["a.json", "b.json"])
    expect(fs.readdirSync(join(q.root, "error")).sort()).toEqual(["c.json", "d.json"])
  })
})

describe("spool's start-up", () => {
  it("runs consume without importing arktype, as consume's own entry point does", async () => {
    await using q = await tempQueue({ seed: { "a.json": message("a"), "d.json": "{no" } })
    const r = await runDenying("arktype", [spoolBin, "consume", "--root", q.root])
    expect(r.stderr).not.toContain("was imported")
    expect(r.exitCode).toBe(0)
    expect(fs.readdirSync(join(q.root, "done"))).toEqual(["a.json"])
  })

  it("reads every command's summary for --help without importing the validator", async () => {
    const r = await runDenying("@ark/schema", [spoolBin, "--help"])
    expect(r.stderr).not.toContain("was imported")
    expect(r.stdout).toContain("  schema ")
    expect(r.exitCode).toBe(0)
  })
})
