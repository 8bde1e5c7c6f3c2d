// What production modules (each package's src/ but its tests, and its bin/) may import: never
// test support (not @spool/test-support, and nothing under packages/test-support/ or test/ by
// path); and in the core, the rules that keep its folders the architecture (the ledger port
// free of adapters and drivers, adapters apart, consume/ on the port, no cycle between
// folders). A static scan of every import and export specifier, type-only ones included.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { repoRoot } from "@spool/test-support"

const testOnlyDirs = [join(repoRoot, "packages/test-support"), join(repoRoot, "test")]

const specifier =
  /\b(?:import|export)\b[^"'`;]*?\bfrom\s*["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']|\bimport\s*["']([^"']+)["']/g

/** The specifiers in `source` (a file at `file`) that reach test support. */
function testSupportImports(source: string, file: string): string[] {
  const found: string[] = []
  for (const m of source.matchAll(specifier)) {
    const spec = m[1] ?? m[2] ?? m[3] ?? ""
    const target = spec.startsWith(".") ? resolve(dirname(file), spec) : undefined
    const isTestOnly =
      spec === "@spool/test-support" ||
      spec.startsWith("@spool/test-support/") ||
      (target !== undefined && testOnlyDirs.some((d) => target === d || target.startsWith(`${d}/`)))
    if (isTestOnly) found.push(spec)
  }
  return found
}

const productionPackages = fs
  .readdirSync(join(repoRoot, "packages"))
  .filter((p) => p !== "test-support" && fs.existsSync(join(repoRoot, "packages", p, "package.json")))

function productionFiles(): string[] {
  const glob = new Bun.Glob("{src,bin}/**/*.ts")
  return productionPackages.flatMap((p) =>
    [...glob.scanSync({ cwd: join(repoRoot, "packages", p) })]
      .filter((f) => !f.endsWith(".test.ts"))
      .map((f) => join(repoRoot, "packages", p, f)),
  )
}

describe("test support", () => {
  it("is found by the scan in every form of import", () => {
    const file = join(repoRoot, "packages/core/src/errors.ts")
    const source = [
      `import { rng } from "@spool/test-support"`,
      `import type { Snapshot } from "@spool/test-support"`,
      `export { tempQueue } from "@spool/test-support"`,
      `const m = await import("../../test-support/src/chaos.ts")`,
      `import "../../../test/apps/balances.ts"`,
      `import { list } from "./files.ts"`,
      `import { SQL } from "bun"`,
    ].join("\n")
    expect(testSupportImports(source, file)).toEqual([
      "@spool/test-support",
      "@spool/test-support",
      "@spool/test-support",
      "../../test-support/src/chaos.ts",
      "../../../test/apps/balances.ts",
    ])
  })

  it("is imported by no production module", () => {
    const files = productionFiles()
    expect(files.length).toBeGreaterThan(30)
    expect(files).toContain(join(repoRoot, "packages/consumer/bin/consume.ts"))
    const offenders = files.flatMap((f) =>
      testSupportImports(fs.readFileSync(f, "utf8"), f).map((s) => `${relative(repoRoot, f)}: ${s}`),
    )
    expect(offenders).toEqual([])
  })

  it("is no production package's runtime dependency", () => {
    const runtime = productionPackages.filter((p) => {
      const pkg = JSON.parse(fs.readFileSync(join(repoRoot, "packages", p, "package.json"), "utf8"))
      return "@spool/test-support" in { ...pkg.dependencies, ...pkg.peerDependencies, ...pkg.optionalDependencies }
    })
    expect(productionPackages).toContain("core")
    expect(runtime).toEqual([])
  })
})

const coreSrc = join(repoRoot, "packages/core/src")
const drivers = new Set(["bun:sqlite", "bun"])
const isAdapter = (m: string) => m.startsWith("ledger/sqlite/") || m.startsWith("ledger/postgres/")
const adapterOf = (m: string) => m.split("/").slice(0, 2).join("/")

/**
 * The core's production modules (paths under src/) and what each imports: another module as
 * its path under src/, anything else (a driver, a package, a .sql file) as written.
 */
function coreImports(): Map<string, string[]> {
  const glob = new Bun.Glob("**/*.ts")
  const modules = new Map<string, string[]>()
  for (const m of glob.scanSync({ cwd: coreSrc })) {
    if (m.endsWith(".test.ts") || m.endsWith(".type-test.ts") || m.endsWith(".d.ts")) continue
    const file = join(coreSrc, m)
    const specs = [...fs.readFileSync(file, "utf8").matchAll(specifier)].map((s) => s[1] ?? s[2] ?? s[3] ?? "")
    modules.set(
      m,
      specs.map((spec) => (spec.startsWith(".") ? relative(coreSrc, resolve(dirname(file), spec)) : spec)),
    )
  }
  return modules
}

/**
 * The part of the core a module lives in, for the cycle rule: each adapter's folder, open.ts
 * (which imports both adapters, and which no adapter imports), the rest of ledger/, each other
 * folder, and each file at the top on its own.
 */
function roomOf(m: string): string {
  if (isAdapter(m)) return adapterOf(m)
  if (m === "ledger/open.ts") return m
  const slash = m.indexOf("/")
  return slash === -1 ? m : m.slice(0, slash)
}

/** Every import that breaks one of the core's rules, as "FROM -> TO: the rule", or a cycle between rooms. */
function brokenRules(modules: Map<string, string[]>): string[] {
  const broken: string[] = []
  const core = (m: string) => modules.get(m) ?? []
  // The port and the model, and everything they import in turn, reach no adapter and no driver.
  for (const start of ["ledger/port.ts", "ledger/model.ts"]) {
    const seen = new Set([start])
    const queue = [start]
    for (let m = queue.shift(); m !== undefined; m = queue.shift())
      for (const to of core(m)) {
        if (isAdapter(to) || drivers.has(to)) broken.push(`${m} -> ${to}: ${start} reaches no adapter and no driver`)
        else if (modules.has(to) && !seen.has(to)) {
          seen.add(to)
          queue.push(to)
        }
      }
  }
  for (const [m, imports] of modules)
    for (const to of imports) {
      if (isAdapter(m) && isAdapter(to) && adapterOf(to) !== adapterOf(m))
        broken.push(`${m} -> ${to}: an adapter never imports the other adapter`)
      if (isAdapter(m) && (to.startsWith("consume/") || to === "ledger/open.ts"))
        broken.push(`${m} -> ${to}: an adapter never imports consume/ or open.ts`)
      if (m.startsWith("consume/") && to.startsWith("ledger/") && to !== "ledger/port.ts" && to !== "ledger/model.ts")
        broken.push(`${m} -> ${to}: consume/ imports from ledger/ only the port and the model`)
    }
  // Rooms that reach each other: a cycle, named by one import that closes it.
  const edges = new Map<string, Map<string, string>>()
  for (const [m, imports] of modules)
    for (const to of imports) {
      const [a, b] = [roomOf(m), roomOf(to)]
      if (!modules.has(to) || a === b) continue
      if (!edges.has(a)) edges.set(a, new Map())
      edges.get(a)?.set(b, edges.get(a)?.get(b) ?? `${m} -> ${to}`)
    }
  const reaches = (from: string, to: string): boolean => {
    const seen = new Set([from])
    const queue = [from]
    for (let r = queue.shift(); r !== undefined; r = queue.shift())
      for (const next of edges.get(r)?.keys() ?? []) {
        if (next === to) return true
        if (!seen.has(next)) {
          seen.add(next)
          queue.push(next)
        }
      }
    return false
  }
  for (const [a, out] of edges)
    for (const [b, via] of out)
      if (reaches(b, a)) broken.push(`${via}: ${b} reaches ${a} back, a cycle between folders`)
  return broken
}

describe("the core's folders", () => {
  it("are read from the sources as the rules see them", () => {
    const modules = coreImports()
    expect(modules.get("ledger/open.ts")).toContain("ledger/sqlite/ledger.ts")
    expect(modules.get("ledger/open.ts")).toContain("ledger/postgres/ledger.ts")
    expect(modules.get("ledger/sqlite/ledger.ts")).toContain("bun:sqlite")
    expect(modules.get("ledger/postgres/ledger.ts")).toContain("bun")
    expect(modules.get("consume/engine.ts")).toContain("ledger/port.ts")
    expect(roomOf("ledger/sqlite/commit.ts")).toBe("ledger/sqlite")
    expect(roomOf("ledger/verdicts.ts")).toBe("ledger")
    expect(roomOf("errors.ts")).toBe("errors.ts")
  })

  it("find each kind of broken rule", () => {
    const modules = new Map(
      Object.entries({
        "ledger/port.ts": ["ledger/model.ts", "ledger/stats.ts"],
        "ledger/model.ts": ["queue/owner.ts"],
        "ledger/stats.ts": ["bun:sqlite"],
        "ledger/verdicts.ts": ["consume/summary.ts"],
        "ledger/open.ts": ["ledger/sqlite/ledger.ts", "ledger/postgres/ledger.ts"],
        "ledger/sqlite/ledger.ts": ["ledger/port.ts", "ledger/postgres/errors.ts", "ledger/open.ts"],
        "ledger/postgres/ledger.ts": ["bun", "ledger/postgres/errors.ts", "consume/options.ts"],
        "ledger/postgres/errors.ts": [],
        "queue/owner.ts": ["node:os"],
        "consume/summary.ts": ["ledger/model.ts"],
        "consume/options.ts": ["ledger/port.ts", "ledger/verdicts.ts"],
      }),
    )
    expect(brokenRules(modules).sort()).toEqual([
      "consume/options.ts -> ledger/verdicts.ts: consume/ imports from ledger/ only the port and the model",
      "consume/summary.ts -> ledger/model.ts: ledger reaches consume back, a cycle between folders",
      "ledger/open.ts -> ledger/sqlite/ledger.ts: ledger/sqlite reaches ledger/open.ts back, a cycle between folders",
      "ledger/postgres/ledger.ts -> consume/options.ts: an adapter never imports consume/ or open.ts",
      "ledger/sqlite/ledger.ts -> ledger/open.ts: an adapter never imports consume/ or open.ts",
      "ledger/sqlite/ledger.ts -> ledger/open.ts: ledger/open.ts reaches ledger/sqlite back, a cycle between folders",
      "ledger/sqlite/ledger.ts -> ledger/postgres/errors.ts: an adapter never imports the other adapter",
      "ledger/stats.ts -> bun:sqlite: ledger/port.ts reaches no adapter and no driver",
      "ledger/verdicts.ts -> consume/summary.ts: consume reaches ledger back, a cycle between folders",
    ])
  })

  it("keep every rule in packages/core/src", () => {
    const modules = coreImports()
    expect(modules.size).toBeGreaterThan(50)
    expect(brokenRules(modules)).toEqual([])
  })
})
