// The documentation's relative links and the repository paths it names all exist, so a page
// moved or a file renamed fails here rather than in a reader's browser. The README is the way
// in: it links every page of docs/ and holds the one exit code table.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { repoRoot } from "@spool/test-support"

const markdownIn = (dir: string) =>
  fs
    .readdirSync(join(repoRoot, dir))
    .filter((n) => n.endsWith(".md"))
    .map((n) => `${dir}/${n}`)

const docs = markdownIn("docs")
/** Per-machine benchmark history: it names source files as they were at the measured commit. */
const history = markdownIn("bench/results")
const pages = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md", ...docs, ...history]

/** Paths that `bun run build` and the benchmark write, absent from a fresh checkout. */
const generated = ["packages/ops/dist/", "packages/core/dist/", "bench/out/"]

const read = (page: string) => fs.readFileSync(join(repoRoot, page), "utf8")

/** The page's text outside fenced code blocks (links and headings there are not markdown). */
const prose = (text: string) => text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, "")

/** GitHub's anchor for each heading: lower case, punctuation dropped, spaces as hyphens. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const m of prose(text).matchAll(/^#{1,6}\s+(.+?)\s*$/gm)) {
    const base = (m[1] ?? "")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/ /g, "-")
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

/** `a{b,c}d` -> `abd`, `acd` (the one-level braces the docs use for sibling files). */
function expandBraces(path: string): string[] {
  const m = /\{([^{}]*)\}/.exec(path)
  if (m === null) return [path]
  const [head, tail] = [path.slice(0, m.index), path.slice(m.index + m[0].length)]
  return (m[1] ?? "").split(",").flatMap((alt) => expandBraces(`${head}${alt}${tail}`))
}

/** The relative link targets of a page's prose, as written. */
function links(text: string): string[] {
  const out: string[] = []
  for (const m of prose(text).matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1] ?? ""
    if (!/^[a-z]+:/i.test(target)) out.push(target)
  }
  return out
}

/** Repository paths a page names (`packages/...`, `test/...`, ...), code blocks included. */
function namedPaths(text: string): string[] {
  const found = text.matchAll(/(?<![\w./~$-])((?:packages|test|bench|scripts|fixtures|docs|\.ci)\/[\w.@{},/-]*)/g)
  return [...found].map((m) => (m[1] ?? "").replace(/[.,:]+$/, "")).flatMap(expandBraces)
}

/** Where a path in backticks may be read from: the repository root, or a package (`consume/claim.ts`, `bin/spool.ts`). */
const bases = [
  "",
  "packages/core/",
  ...fs.readdirSync(join(repoRoot, "packages")).flatMap((p) => [`packages/${p}/`, `packages/${p}/src/`]),
]

/** Every file name of the repository's sources and pages, for a bare name in backticks. */
const fileNames = new Set(
  [...new Bun.Glob("**/*.{ts,sql,md}").scanSync({ cwd: repoRoot })]
    .filter((f) => !f.includes("node_modules/") && !f.includes("dist/"))
    .map((f) => f.split("/").pop()),
)

/** The files `text` names in backticks (`path.ts`, `.sql`, `.md`) that no file answers to. */
function missingFiles(text: string): string[] {
  const missing: string[] = []
  for (const m of text.matchAll(/`([\w./@-]+\.(?:ts|sql|md))`/g)) {
    const path = m[1] ?? ""
    const isThere = path.includes("/") ? bases.some((b) => fs.existsSync(join(repoRoot, b, path))) : fileNames.has(path)
    if (!isThere) missing.push(path)
  }
  return missing
}

describe.each(pages)("%s", (page) => {
  const text = read(page)

  it("links only to files and headings that exist", () => {
    const broken: string[] = []
    for (const target of links(text)) {
      const [path = "", anchor] = target.split("#")
      const file = path === "" ? join(repoRoot, page) : resolve(dirname(join(repoRoot, page)), path)
      if (!fs.existsSync(file)) broken.push(`${target}: no ${relative(repoRoot, file)}`)
      else if (anchor !== undefined && !anchors(fs.readFileSync(file, "utf8")).has(anchor))
        broken.push(`${target}: no heading #${anchor} in ${relative(repoRoot, file)}`)
    }
    expect(broken).toEqual([])
  })

  it("names only repository paths that exist", () => {
    const checked = history.includes(page) ? namedPaths(text).filter((p) => p.startsWith("bench/")) : namedPaths(text)
    const missing = checked.filter((p) => !generated.some((g) => p.startsWith(g)) && !fs.existsSync(join(repoRoot, p)))
    expect(missing).toEqual([])
  })

  it("names in backticks only files that exist", () => {
    // The benchmark history names source files as they were at the measured commit.
    expect(history.includes(page) ? [] : missingFiles(text)).toEqual([])
  })
})

it("tells a file named in backticks that exists from one that does not", () => {
  expect(missingFiles("`consume/claim.ts`, `ledger-port.ts`, `sql/stats.sql`, `consume/nothing.ts`")).toEqual([
    "ledger-port.ts",
    "consume/nothing.ts",
  ])
})

describe("the README", () => {
  const readme = read("README.md")

  it("links every page of docs/", () => {
    const linked = new Set(links(readme).map((t) => t.split("#")[0]))
    expect(docs.filter((d) => !linked.has(d))).toEqual([])
  })

  it("holds the one exit code table, with every code", () => {
    const header = /^\| code \| meaning \|/m
    expect(pages.filter((p) => header.test(read(p)))).toEqual(["README.md"])
    const table = readme.slice(readme.search(header)).split("\n\n")[0] ?? ""
    const codes = [...table.matchAll(/^\| ([^ |]+) \|/gm)].map((m) => m[1]).slice(2)
    expect(codes).toEqual(["0", "1", "2", "3", "4", "128+n"])
  })
})
