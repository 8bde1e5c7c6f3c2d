// The files the docs name are there: every `path.ts`, `.sql` or `.md` in backticks in README.md,
// ARCHITECTURE.md, BENCHMARKS.md and docs/. A path with a folder is read from the repository
// root or from a package (a doc says `consume/claim.ts` inside packages/core/src, `bin/spool.ts`
// inside packages/spool); a bare name must be some file's name.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot } from "@spool/test-support"

const docs = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"]
  .concat(fs.existsSync(join(repoRoot, "docs")) ? fs.readdirSync(join(repoRoot, "docs")).map((f) => `docs/${f}`) : [])
  .filter((f) => f.endsWith(".md"))

const bases = [
  "",
  "packages/core/src/",
  "packages/core/",
  ...fs.readdirSync(join(repoRoot, "packages")).flatMap((p) => [`packages/${p}/`, `packages/${p}/src/`]),
]

const names = new Set(
  [...new Bun.Glob("**/*.{ts,sql,md}").scanSync({ cwd: repoRoot })]
    .filter((f) => !f.includes("node_modules/") && !f.includes("dist/"))
    .map((f) => f.split("/").pop()),
)

/** The paths `text` names in backticks that no file answers to. */
function missingPaths(text: string): string[] {
  const missing: string[] = []
  for (const m of text.matchAll(/`([\w./@-]+\.(?:ts|sql|md))`/g)) {
    const path = m[1] as string
    const isThere = path.includes("/") ? bases.some((b) => fs.existsSync(join(repoRoot, b, path))) : names.has(path)
    if (!isThere) missing.push(path)
  }
  return missing
}

describe("the paths the docs name", () => {
  it("are told from missing ones", () => {
    expect(missingPaths("`consume/claim.ts`, `ledger-port.ts`, `sql/stats.sql`, `consume/nothing.ts`")).toEqual([
      "ledger-port.ts",
      "consume/nothing.ts",
    ])
  })

  it.each(docs)("%s names only files that exist", (doc) => {
    expect(missingPaths(fs.readFileSync(join(repoRoot, doc), "utf8"))).toEqual([])
  })
})
