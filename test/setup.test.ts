// `bun run setup`: creates the queue directories and seeds inbox/ without ever duplicating or overwriting.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { fixturesDir, list, repoRoot, run, snapshot, spool, tempDir } from "@spool/test-support"

/** The 20 messages of the sample: not README.txt, not evt-partial.json.tmp, not archive/evt-old.json. */
const sampleMessages = [
  "evt-03bdf456.json",
  "evt-067423c6.json",
  "evt-24b17ea0.json",
  "evt-49db0cae.json",
  "evt-6262f463.json",
  "evt-762cbf63.json",
  "evt-8e5d0eac.json",
  "evt-9111ff06.json",
  "evt-aa506e27.json",
  "evt-broken-0001.json",
  "evt-cda90e81.json",
  "evt-d19c7636.json",
  "evt-e9c079aa.json",
  "evt-ebbeade4.json",
  "evt-f468ed87.json",
  "evt-f772679f.json",
  "evt-noorder-0002.json",
  "retry-2a6b7b85.json",
  "retry-b061cf38.json",
  "retry-f6ea2824.json",
]

const bytesOf = (dir: string) => Object.fromEntries(list(dir).map((n) => [n, fs.readFileSync(join(dir, n), "utf8")]))

describe("bun run setup", () => {
  it("creates an empty queue without --from: a production root never gets the sample", async () => {
    await using d = await tempDir()
    const root = join(d.path, "q-typo")
    const r = await spool("setup", ["--root", root])
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(`setup: queue ready at ${root}\n`)
    expect(r.exitCode).toBe(0)
    expect(list(root)).toEqual(["deferred", "done", "error", "inbox", "processing", "tmp"])
    for (const dir of ["inbox", "processing", "done", "error", "deferred"]) expect(list(join(root, dir))).toEqual([])
  })

  it("refuses a root inside a queue's directory and names the enclosing root", async () => {
    await using d = await tempDir()
    const root = join(d.path, "q")
    expect((await spool("setup", ["--root", root])).exitCode).toBe(0)
    for (const inner of ["error", "inbox", "processing", "done", "deferred", "tmp", "error/sub"]) {
      const r = await spool("setup", ["--root", join(root, inner)])
      expect(r.exitCode).toBe(2)
      expect(r.stderr).toContain(`of the queue ${root}, not a queue root; use --root ${root}`)
      expect(r.stderr).not.toContain("create it with")
    }
    expect(list(join(root, "error"))).toEqual([])
    // Every command that is pointed inside a queue says which root to use instead of offering setup.
    const c = await spool("consume", ["--root", join(root, "error")])
    expect(c.exitCode).toBe(2)
    expect(c.stderr).toBe(
      `consume: ${join(root, "error")} is the error/ directory of the queue ${root}, not a queue root; use --root ${root}\n`,
    )
  })

  it("creates the four directories and copies exactly the 20 sample messages given --from, byte for byte", async () => {
    await using d = await tempDir()
    const root = join(d.path, "q")
    const r = await spool("setup", ["--root", root, "--from", fixturesDir])
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(`setup: queue ready at ${root}; copied 20 message(s) from ${fixturesDir} into inbox/\n`)
    expect(r.exitCode).toBe(0)
    for (const dir of ["inbox", "processing", "done", "error"])
      expect(fs.statSync(join(root, dir)).isDirectory()).toBe(true)
    expect(list(join(root, "inbox"))).toEqual(sampleMessages)
    for (const name of sampleMessages)
      expect(fs.readFileSync(join(root, "inbox", name))).toEqual(fs.readFileSync(join(fixturesDir, name)))
    expect(list(join(root, "processing"))).toEqual([])
    expect(list(join(root, "done"))).toEqual([])
    expect(list(join(root, "error"))).toEqual([])
    // The sample holds decoys that must stay behind.
    expect(list(fixturesDir)).toContain("README.txt")
    expect(list(fixturesDir)).toContain("evt-partial.json.tmp")
    expect(list(join(fixturesDir, "archive"))).toContain("evt-old.json")
  })

  it("copies from --from only the regular *.json files directly in it", async () => {
    await using d = await tempDir()
    const src = join(d.path, "src")
    fs.mkdirSync(src)
    fs.writeFileSync(join(src, "a.json"), '{"msg_id":"a"}')
    fs.writeFileSync(join(src, "b.json"), '{"msg_id":"b"}')
    fs.writeFileSync(join(src, "c.json.tmp"), "half-written")
    fs.writeFileSync(join(src, "d.txt"), "not a message")
    fs.writeFileSync(join(d.path, "outside.json"), '{"msg_id":"outside"}')
    fs.symlinkSync(join(d.path, "outside.json"), join(src, "link.json"))
    fs.mkdirSync(join(src, "x.json"))
    fs.writeFileSync(join(src, "x.json", "inner.json"), '{"msg_id":"inner"}')
    const root = join(d.path, "q")
    const r = await spool("setup", ["--root", root, "--from", src])
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(`setup: queue ready at ${root}; copied 2 message(s) from ${src} into inbox/\n`)
    expect(r.exitCode).toBe(0)
    expect(bytesOf(join(root, "inbox"))).toEqual({ "a.json": '{"msg_id":"a"}', "b.json": '{"msg_id":"b"}' })
    expect(fs.lstatSync(join(root, "inbox", "a.json")).isFile()).toBe(true)
  })

  it("copies nothing the second time and leaves the inbox bytes unchanged", async () => {
    await using d = await tempDir()
    const root = join(d.path, "q")
    expect((await spool("setup", ["--root", root, "--from", fixturesDir])).exitCode).toBe(0)
    // A message edited in inbox/ since must not be overwritten by the sample's copy.
    fs.writeFileSync(join(root, "inbox", "evt-03bdf456.json"), "edited")
    const before = bytesOf(join(root, "inbox"))
    const r = await spool("setup", ["--root", root, "--from", fixturesDir])
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(
      `setup: queue ready at ${root}; copied 0 message(s) from ${fixturesDir} into inbox/, skipped 20 already in the queue\n`,
    )
    expect(r.exitCode).toBe(0)
    expect(bytesOf(join(root, "inbox"))).toEqual(before)
    expect(before["evt-03bdf456.json"]).toBe("edited")
    expect(Object.keys(before)).toHaveLength(20)
  })

  it("does not deliver again what consume has already moved to done/ or error/", async () => {
    await using d = await tempDir()
    const root = join(d.path, "q")
    expect((await spool("setup", ["--root", root, "--from", fixturesDir])).exitCode).toBe(0)
    expect((await spool("consume", ["--root", root])).exitCode).toBe(0)
    const consumed = snapshot(root)
    const r = await spool("setup", ["--root", root, "--from", fixturesDir])
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain("copied 0 message(s)")
    expect(r.stderr).toContain("skipped 20 already in the queue")
    expect(r.exitCode).toBe(0)
    expect(list(join(root, "inbox"))).toEqual([])
    expect(snapshot(root)).toEqual(consumed)
  })

  it("takes the root from SPOOL_ROOT when --root is absent, and --root wins over it", async () => {
    await using d = await tempDir()
    const src = join(d.path, "src")
    fs.mkdirSync(src)
    fs.writeFileSync(join(src, "a.json"), "{}")
    const envRoot = join(d.path, "from-env")
    const r = await spool("setup", ["--from", src], { SPOOL_ROOT: envRoot })
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(`setup: queue ready at ${envRoot}; copied 1 message(s) from ${src} into inbox/\n`)
    expect(r.exitCode).toBe(0)
    expect(list(join(envRoot, "inbox"))).toEqual(["a.json"])

    const flagRoot = join(d.path, "from-flag")
    const r2 = await spool("setup", ["--root", flagRoot, "--from", src], { SPOOL_ROOT: envRoot })
    expect(r2.stdout).toBe("")
    expect(r2.stderr).toContain(`queue ready at ${flagRoot}; copied 1 message(s)`)
    expect(r2.exitCode).toBe(0)
    expect(list(join(flagRoot, "inbox"))).toEqual(["a.json"])
  })

  it("uses ./spool in the working directory when neither --root nor SPOOL_ROOT is given", async () => {
    await using d = await tempDir()
    const src = join(d.path, "src")
    fs.mkdirSync(src)
    fs.writeFileSync(join(src, "a.json"), "{}")
    const r = await run(["bun", join(repoRoot, "packages/consumer/bin/setup.ts"), "--from", src], {
      cwd: d.path,
      env: { SPOOL_ROOT: "" },
    })
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(
      `setup: queue ready at ${join(d.path, "spool")}; copied 1 message(s) from ${src} into inbox/\n`,
    )
    expect(r.exitCode).toBe(0)
    expect(list(join(d.path, "spool"))).toEqual(["deferred", "done", "error", "inbox", "processing", "tmp"])
    expect(list(join(d.path, "spool", "inbox"))).toEqual(["a.json"])
  })

  it("prints its usage for --help and exits 0 without creating anything", async () => {
    await using d = await tempDir()
    const r = await spool("setup", ["--help"], { SPOOL_ROOT: join(d.path, "q") })
    expect(r.stdout).toStartWith("Usage: bun run setup [--root DIR] [--from DIR] [--ledger URL] [--rebind]\n")
    expect(r.stdout).toContain("--from DIR")
    expect(r.stdout).toContain("Exit codes:")
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    expect(list(d.path)).toEqual([])
  })

  it("exits 2 for a --from that does not exist, and for an unknown option", async () => {
    await using d = await tempDir()
    const root = join(d.path, "q")
    const r = await spool("setup", ["--root", root, "--from", join(d.path, "nope")])
    expect(r.stdout).toBe("")
    expect(fs.existsSync(root)).toBe(false) // a typo in --from leaves no half-made queue
    expect(r.stderr).toBe(
      `setup: --from ${join(d.path, "nope")} does not exist; give a directory of .json message files\n`,
    )
    expect(r.exitCode).toBe(2)

    const r2 = await spool("setup", ["--root", root, "--frm", d.path])
    expect(r2.stdout).toBe("")
    expect(r2.stderr).toBe(
      "setup: unknown option --frm (did you mean --from?); run bun run setup --help for the options\n",
    )
    expect(r2.exitCode).toBe(2)
  })
})
