// @spool/core as an application outside this repository depends on it: installed with
// `bun add` from a checkout (the package's folder) and from a `bun pm pack` tarball into fresh
// directories under the system temp dir, so nothing resolves through the workspace. Each
// application is type-checked by tsc with a strict Bun tsconfig and run with bun: that needs
// the shipped declarations (the sources' `.sql` text imports have no type outside the repo)
// and the shipped .sql files (the sources read them at import).
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot, run, type TempDir, tempDir, tempQueue } from "@spool/test-support"

const core = join(repoRoot, "packages/core")
const tsc = join(repoRoot, "node_modules/.bin/tsc")
const rootPackage = JSON.parse(fs.readFileSync(join(repoRoot, "package.json"), "utf8"))
const typesBun = rootPackage.devDependencies["@types/bun"] as string

/** A new Bun application's tsconfig, as strict as they come, without allowImportingTsExtensions. */
const appTsconfig = {
  compilerOptions: {
    target: "ESNext",
    lib: ["ESNext"],
    module: "Preserve",
    moduleDetection: "force",
    moduleResolution: "bundler",
    types: ["bun"],
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    noImplicitOverride: true,
    verbatimModuleSyntax: true,
    noEmit: true,
    skipLibCheck: true,
  },
}

const payment = (i: number) => ({ msg_id: `pay-${i}`, order_no: `O-${i}`, seq: 1, amount: i + 0.25, currency: "EUR" })

let work: TempDir
let tarball: string

beforeAll(async () => {
  work = await tempDir("spool-packaging-")
  // Packing must build the declarations itself (prepack), as on a fresh clone; the checkout
  // install below then copies the same ones.
  fs.rmSync(join(core, "dist/types"), { recursive: true, force: true })
  const packed = await run(["bun", "pm", "pack", "--destination", work.path], { cwd: core })
  expect(packed.stderr).not.toContain("error:")
  expect(packed.exitCode).toBe(0)
  const tgz = fs.readdirSync(work.path).filter((f) => f.endsWith(".tgz"))
  expect(tgz).toHaveLength(1)
  tarball = join(work.path, tgz[0] as string)
}, 120_000)

afterAll(() => work[Symbol.asyncDispose]())

/** A fresh application directory with @spool/core added from `spec`, and @types/bun as docs/library.md says. */
async function application(name: string, spec: string): Promise<string> {
  const dir = join(work.path, name)
  fs.mkdirSync(dir)
  const pkg = { name, private: true, type: "module", devDependencies: { "@types/bun": typesBun } }
  fs.writeFileSync(join(dir, "package.json"), `${JSON.stringify(pkg, null, 2)}\n`)
  fs.writeFileSync(join(dir, "tsconfig.json"), `${JSON.stringify(appTsconfig, null, 2)}\n`)
  fs.copyFileSync(join(import.meta.dir, "apps/installed.ts"), join(dir, "app.ts"))
  const added = await run(["bun", "add", spec], { cwd: dir })
  expect(added.stderr).not.toContain("error:")
  expect(added.exitCode).toBe(0)
  return dir
}

const typecheck = (dir: string) => run([tsc, "--noEmit", "-p", dir], { cwd: dir })

/** Runs the application on a queue of three payments. Never auto-installs: it runs what is in node_modules. */
async function runApp(dir: string) {
  await using q = await tempQueue({ seed: { "a.json": payment(1), "b.json": payment(2), "c.json": payment(3) } })
  const r = await run(["bun", "--no-install", "app.ts", q.root], { cwd: dir })
  return { ...r, done: fs.readdirSync(join(q.root, "done")).sort() }
}

describe.each([
  ["a checkout", () => core],
  ["a packed tarball", () => tarball],
])("@spool/core added from %s", (from, spec) => {
  let dir: string
  beforeAll(async () => {
    dir = await application(from.replaceAll(" ", "-"), spec())
  }, 120_000)

  it("is a copy in the application's node_modules, with its declarations and SQL", () => {
    const installed = join(dir, "node_modules/@spool/core")
    expect(fs.lstatSync(installed).isSymbolicLink()).toBe(false)
    expect(fs.existsSync(join(installed, "dist/types/index.d.ts"))).toBe(true)
    expect(fs.existsSync(join(installed, "sql/sqlite/0001-init.sql"))).toBe(true)
  })

  it("type-checks with tsc --noEmit", async () => {
    const r = await typecheck(dir)
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
  }, 60_000)

  it("runs with bun and processes every message", async () => {
    const r = await runApp(dir)
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    const { summary, rows } = JSON.parse(r.stdout)
    expect(summary).toMatchObject({ claimed: 3, processed: 3, rejected: 0 })
    expect(rows).toEqual([
      { file: "a.json", order_no: "O-1", cents: 125 },
      { file: "b.json", order_no: "O-2", cents: 225 },
      { file: "c.json", order_no: "O-3", cents: 325 },
    ])
    expect(r.done).toEqual(["a.json", "b.json", "c.json"])
  }, 60_000)
})

describe("an installed @spool/core", () => {
  let dir: string
  beforeAll(async () => {
    dir = await application("incomplete", tarball)
  }, 120_000)

  it("does not type-check without its declarations", async () => {
    fs.rmSync(join(dir, "node_modules/@spool/core/dist"), { recursive: true, force: true })
    const r = await typecheck(dir)
    expect(r.stdout).toContain(".sql")
    expect(r.exitCode).not.toBe(0)
  }, 60_000)

  it("does not run without its SQL files", async () => {
    fs.rmSync(join(dir, "node_modules/@spool/core/sql"), { recursive: true, force: true })
    const r = await runApp(dir)
    expect(r.stderr).toMatch(/Cannot find module '(\.\.\/)+sql\//)
    expect(r.exitCode).not.toBe(0)
    expect(r.done).toEqual([])
  }, 60_000)
})
