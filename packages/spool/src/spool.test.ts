// The command table against each command's spec: the names agree, every summary is one line,
// and no usage line names an option the command does not take.
import { describe, expect, it } from "bun:test"
import { commands } from "./spool.ts"

const modules = await Promise.all(
  Object.entries(commands).map(async ([name, load]) => [name, (await load()).spec] as const),
)

describe("the spool command table", () => {
  it("holds every tool", () => {
    expect(Object.keys(commands)).toEqual([
      "consume",
      "setup",
      "schema",
      "enqueue",
      "order-check",
      "compact",
      "stats",
      "verify",
      "list",
      "show",
      "lag",
      "replay",
      "delete",
      "serve",
      "completion",
      "man",
    ])
  })

  it.each(modules)("names %s as its spec does, so its messages name the command run", (name, spec) => {
    expect(spec.name).toBe(name)
  })

  it.each(modules)("gives %s a one-line summary", (_name, spec) => {
    expect(spec.summary).not.toContain("\n")
    expect(spec.summary.length).toBeLessThanOrEqual(100)
  })

  it.each(modules)("names in %s's usage line only options it takes", (_name, spec) => {
    const named = [...spec.usage.matchAll(/--([a-z][a-z-]*)/g)].map((m) => m[1])
    expect(named.filter((o) => o === undefined || !(o in spec.options))).toEqual([])
  })
})
