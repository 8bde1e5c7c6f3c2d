// What a consume run loads. Neither @ark/schema nor arktype with spool's own rules: consume
// judges with those rules compiled by hand (message/rules.ts), so the schema library (whose
// import builds its intrinsic nodes, and arktype's its whole keyword scope: about 0.4 s and
// over 40 MB) is loaded only by an application that passes its own type. A preloaded plugin
// stops the process the moment a denied module loads, so these tests see what is imported,
// not how long anything takes.
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
  /** Files of every verdict: processed, duplicate, invalid-field, missing-field, parse. */
  const everyVerdict = {
    "a.json": message("a"),
    "b.json": message("a"),
    "c.json": { ...message("c"), seq: 0 },
    "e.json": { msg_id: "e" },
    "d.json": "{no",
  }

  it.each(Object.keys(entries) as (keyof typeof entries)[])("never imports %s, whatever it judges", async (module) => {
    await using q = await tempQueue({ seed: everyVerdict })
    const r = await consumeDenying(module, q.root)
    expect(r.stderr).not.toContain("was imported")
    expect(r.exitCode).toBe(0)
    expect(fs.readdirSync(join(q.root, "done")).sort()).toEqual(["a.json", "b.json"])
    expect(fs.readdirSync(join(q.root, "error")).sort()).toEqual(["c.json", "d.json", "e.json"])
    // The rejections' details are the schema's own words.
    expect(r.stderr).toContain('detail="seq must be at least 1 (was 0)"')
    expect(r.stderr).toContain('detail="missing order_no, seq, amount"')
  })

  it("sees the plugin stop a process that does import what it denies", async () => {
    // The check above can fail: importing message/validate.ts (an application's type goes through it)
    // loads @ark/schema, and the plugin stops the process there.
    const r = await runDenying("@ark/schema", [
      "-e",
      `await import(${JSON.stringify(join(repoRoot, "packages/core/src/message/validate.ts"))})`,
    ])
    expect(r.stderr).toContain("@ark/schema was imported")
    expect(r.exitCode).toBe(99)
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

  it("reads every command's summary for --help without importing @ark/schema", async () => {
    const r = await runDenying("@ark/schema", [spoolBin, "--help"])
    expect(r.stderr).not.toContain("was imported")
    expect(r.stdout).toContain("  schema ")
    expect(r.exitCode).toBe(0)
  })
})
