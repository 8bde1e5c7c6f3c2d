// bench/results/README.md lists every results file the bench wrote, one row each, with the
// machine, the commit and the consume and floor medians read off the file. A file added without
// its row, a row whose file is gone, or a figure copied wrong fails here: the index is how a
// number in BENCHMARKS.md is traced back to the run that printed it.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot } from "@spool/test-support"

const dir = join(repoRoot, "bench/results")
const files = fs
  .readdirSync(dir)
  .filter((n) => n.endsWith(".json"))
  .sort()

interface Row {
  readonly file: string
  readonly label: string
  readonly page: string
  readonly commit: string
  readonly consume: string
  readonly floor: string
}

/** The rows of the index's "Every results file" table. */
function rows(): Row[] {
  const text = fs.readFileSync(join(dir, "README.md"), "utf8")
  const out: Row[] = []
  for (const m of text.matchAll(
    /^\| `([^`]+\.json)` \| \[([^\]]+)\]\(([^)]+)\)[^|]* \| ([^|]+) \| ([^|]+) \| ([^|]+) \|/gm,
  ))
    out.push({
      file: m[1] as string,
      label: m[2] as string,
      page: m[3] as string,
      commit: (m[4] as string).trim(),
      consume: (m[5] as string).trim(),
      floor: (m[6] as string).trim(),
    })
  return out
}

interface Results {
  readonly machine: { readonly cpu: string; readonly kernel: string; readonly commit?: string }
  readonly summary: Record<string, { readonly messagesPerSecond: number } | undefined>
}

/** A contender's median messages/s as the file records it, rounded as the index writes it; "-" when it did not run. */
const recordedMedian = (r: Results, contender: string) => {
  const s = r.summary[contender]
  return s === undefined ? "-" : String(Math.round(s.messagesPerSecond))
}

describe("the benchmark results index", () => {
  const index = rows()

  it("has one row for every results file, and a file for every row", () => {
    expect(files.length).toBeGreaterThan(0)
    expect(index.map((r) => r.file).sort()).toEqual(files)
  })

  it("gives each file's machine, commit and medians as the file records them", () => {
    const wrong: string[] = []
    for (const row of index) {
      const r = JSON.parse(fs.readFileSync(join(dir, row.file), "utf8")) as Results
      const cpu = /EPYC/.test(r.machine.cpu) ? "EPYC" : /Xeon/.test(r.machine.cpu) ? "Xeon" : r.machine.cpu
      const kernel = /fc-v\d+/.exec(r.machine.kernel)?.[0] ?? r.machine.kernel
      if (row.label !== `${cpu} ${kernel}`)
        wrong.push(`${row.file}: machine "${row.label}", the file says ${cpu} ${kernel}`)
      if (!fs.existsSync(join(dir, row.page))) wrong.push(`${row.file}: its machine's page ${row.page} is not there`)
      const commit = r.machine.commit
      if (commit !== undefined && !row.commit.startsWith(`\`${commit}\``))
        wrong.push(`${row.file}: commit ${row.commit}, the file says ${commit}`)
      if (commit === undefined && !/\(attributed\)$|^not recorded$/.test(row.commit))
        wrong.push(
          `${row.file}: commit ${row.commit} for a file that records none (say "(attributed)" or "not recorded")`,
        )
      if (row.consume !== recordedMedian(r, "consume"))
        wrong.push(`${row.file}: consume ${row.consume}, the file says ${recordedMedian(r, "consume")}`)
      if (row.floor !== recordedMedian(r, "floor"))
        wrong.push(`${row.file}: floor ${row.floor}, the file says ${recordedMedian(r, "floor")}`)
    }
    expect(wrong).toEqual([])
  })
})
