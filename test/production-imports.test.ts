// Production modules (each package's src/ but its tests, and its bin/) never import test
// support: not @spool/test-support, and nothing under packages/test-support/ or test/ by path.
// A static scan of every import and export specifier, type-only ones included.
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
    const file = join(repoRoot, "packages/core/src/queue/root.ts")
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
