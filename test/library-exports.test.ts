// The library's face: @spool/core exports at run time exactly the names docs/library.md lists
// in "What the package exports", so an internal that leaks into index.ts, or an export the page
// forgets, fails here.
import { expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot } from "@spool/test-support"

/** The names in the first column of the page's export table. */
function documentedExports(): string[] {
  const page = fs.readFileSync(join(repoRoot, "docs/library.md"), "utf8")
  const start = page.indexOf("\n## What the package exports\n")
  if (start < 0) throw new Error('docs/library.md has no "What the package exports" section')
  const end = page.indexOf("\n## ", start + 1)
  const section = page.slice(start, end < 0 ? undefined : end)
  return [...section.matchAll(/^\| `([A-Za-z_$][\w$]*)` \|/gm)].map((m) => m[1] as string)
}

it("exports at run time exactly the names the library page documents", async () => {
  const documented = documentedExports()
  expect(documented.length).toBeGreaterThan(0)
  const exported = Object.keys(await import("@spool/core"))
  expect(exported.sort()).toEqual([...documented].sort())
})
