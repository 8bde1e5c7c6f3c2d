// The CLI modules called in-process through main(argv): argument handling, exit codes, output streams.
import { Database } from "bun:sqlite"
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { captured, fixturesDir } from "@spool/test-support"
import { main as consume } from "./consume.ts"
import { main as enqueue } from "./enqueue.ts"
import { main as orderCheck } from "./order-check.ts"
import { main as schema } from "./schema.ts"
import { main as setup } from "./setup.ts"

type Main = (argv: readonly string[]) => Promise<number>

/** Runs a main() with stdout and stderr captured instead of printed. */
function call(fn: Main, argv: readonly string[]) {
  return captured(() => fn(argv))
}

async function tempDir(): Promise<{ path: string } & AsyncDisposable> {
  const path = fs.mkdtempSync(join(os.tmpdir(), "spool-cli-"))
  return { path, [Symbol.asyncDispose]: async () => fs.rmSync(path, { recursive: true, force: true }) }
}

const commands: [string, Main][] = [
  ["setup", setup],
  ["schema", schema],
  ["consume", consume],
  ["order-check", orderCheck],
]

describe("every command", () => {
  it.each(commands)("%s --help prints its usage on stdout and returns 0", async (name, fn) => {
    const r = await call(fn, ["--help"])
    expect(r.stdout).toStartWith(`Usage: bun run ${name} [--root DIR]`)
    expect(r.stdout).toContain("Exit codes: 0 ok, ")
    expect(r.stdout).toContain(", 2 usage or not a queue, 3 runtime failure")
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
  })

  it.each(commands)("%s returns 2 for an unknown option", async (name, fn) => {
    const r = await call(fn, ["--no-such-option"])
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(`${name}: unknown option --no-such-option; run bun run ${name} --help for the options\n`)
    expect(r.code).toBe(2)
  })

  it.each(commands)("%s returns 2 for a stray argument", async (name, fn) => {
    await using d = await tempDir()
    const r = await call(fn, ["--root", d.path, "extra"])
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(
      `${name}: unexpected argument extra: ${name} takes no arguments; run bun run ${name} --help for the options\n`,
    )
    expect(r.code).toBe(2)
  })

  it.each(commands.filter(([n]) => n !== "setup"))(
    "%s returns 2 and names bun run setup for a root that is not a queue",
    async (name, fn) => {
      await using d = await tempDir()
      const root = join(d.path, "nowhere")
      const r = await call(fn, ["--root", root])
      expect(r.stdout).toBe("")
      expect(r.stderr).toBe(
        `${name}: ${root} is not a spool queue: inbox/ is missing; create it with: bun run setup --root ${root}\n`,
      )
      expect(r.code).toBe(2)
      expect(fs.existsSync(root)).toBe(false)
    },
  )
})

describe("main() in one process", () => {
  it("runs setup, consume, schema and order-check on the sample with the counts README.md gives", async () => {
    await using d = await tempDir()
    const root = join(d.path, "q")

    const s = await call(setup, ["--root", root, "--from", fixturesDir])
    expect(s.stdout).toBe("")
    expect(s.stderr).toBe(`setup: queue ready at ${root}; copied 20 message(s) from ${fixturesDir} into inbox/\n`)
    expect(s.code).toBe(0)

    const c = await call(consume, ["--root", root, "--no-fsync", "--log-format", "json"])
    expect(c.stdout).toBe("")
    const done = c.stderr
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((e) => e.msg === "done")
    expect(done).toMatchObject({ files: 20, processed: 15, duplicates: 3, conflicts: 0, rejected: 2 })
    expect(c.code).toBe(0)

    const sc = await call(schema, ["--root", root])
    expect(sc.stdout).toStartWith("field,type,role\nmsg_id,string,idempotency-key\n")
    expect(sc.stderr).toContain("from 18 well-formed message(s)")
    expect(sc.code).toBe(0)

    const o = await call(orderCheck, ["--root", root])
    expect(o.stdout).toBe("OK\n")
    expect(o.stderr).toBe("")
    expect(o.code).toBe(0)

    const db = new Database(join(root, "ledger.db"), { readonly: true })
    try {
      expect(db.query("SELECT count(*) AS n FROM processed").get()).toEqual({ n: 15 })
    } finally {
      db.close()
    }
    expect(fs.readdirSync(join(root, "done"))).toHaveLength(18)
    expect(fs.readdirSync(join(root, "error")).sort()).toEqual(["evt-broken-0001.json", "evt-noorder-0002.json"])
  })

  it.each([
    [["--log-format", "xml"], "--log-format takes text or json"],
    [["--batch-size", "0"], "--batch-size takes a whole number >= 1"],
    // One attempt could never have had the message alone: its batch-mates would pay for its crash.
    [["--max-attempts", "1"], "--max-attempts takes a whole number >= 2"],
    [["--max-bytes", "lots"], "--max-bytes takes a size"],
    [["--min-age", "soon"], "--min-age takes a duration"],
  ])("consume %p returns 2 and leaves inbox/ alone", async (args, message) => {
    await using d = await tempDir()
    const root = join(d.path, "q")
    fs.mkdirSync(join(d.path, "src"))
    fs.writeFileSync(join(d.path, "src", "a.json"), JSON.stringify({ msg_id: "m", order_no: "o", seq: 1, amount: 1 }))
    expect((await call(setup, ["--root", root, "--from", join(d.path, "src")])).code).toBe(0)
    const r = await call(consume, ["--root", root, ...args])
    expect(r.stdout).toBe("")
    expect(r.stderr).toStartWith(`consume: ${message}`)
    expect(r.code).toBe(2)
    expect(fs.readdirSync(join(root, "inbox"))).toEqual(["a.json"])
    expect(fs.readdirSync(join(root, "done"))).toEqual([])
  })

  it("setup returns 2 when --from is a file", async () => {
    await using d = await tempDir()
    const root = join(d.path, "q")
    fs.writeFileSync(join(d.path, "file.json"), "{}")
    const r = await call(setup, ["--root", root, "--from", join(d.path, "file.json")])
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(
      `setup: --from ${join(d.path, "file.json")} is not a directory; give a directory of .json message files\n`,
    )
    expect(r.code).toBe(2)
    expect(fs.existsSync(root)).toBe(false)
  })

  it("enqueue names an argument that is not UTF-8 as such, and says how to enqueue the file", async () => {
    await using d = await tempDir()
    const root = join(d.path, "q")
    expect((await call(setup, ["--root", root])).code).toBe(0)
    // What the runtime makes of the argument bad<FF>.json: the file exists, this name of it does not.
    fs.writeFileSync(Buffer.from([...Buffer.from(`${d.path}/bad`), 0xff, ...Buffer.from(".json")]), "{}")
    const r = await call(enqueue, ["--root", root, join(d.path, "bad\uFFFD.json")])
    expect(r.stderr).toContain("its name is not UTF-8")
    expect(r.stderr).toContain("setup --from")
    expect(r.stderr).toEndWith("; nothing was enqueued\n")
    expect(r.code).toBe(2)
    const plain = await call(enqueue, ["--root", root, join(d.path, "missing.json")])
    expect(plain.stderr).not.toContain("UTF-8")
    expect(fs.readdirSync(join(root, "inbox"))).toEqual([])
  })
})
