import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { tempDir } from "./temp.ts"
import { isCi } from "./tools.ts"

/** Runs `bun test` on one file whose test needs `tool`, with CI as given (undefined: unset). */
async function runToolTest(tool: string, ci: string | undefined) {
  await using d = await tempDir()
  const file = join(d.path, "needs-tool.test.ts")
  fs.writeFileSync(
    file,
    `import { expect } from "bun:test"
import { requireTool } from ${JSON.stringify(join(import.meta.dir, "tools.ts"))}
requireTool(${JSON.stringify(tool)}, "apt-get install the-tool")("runs the tool", () => {
  expect(Bun.spawnSync([${JSON.stringify(tool)}]).exitCode).toBe(0)
})
`,
  )
  const { CI: _, ...env } = process.env
  const proc = Bun.spawn([process.execPath, "test", file], {
    cwd: d.path,
    env: { ...env, NO_COLOR: "1", ...(ci === undefined ? {} : { CI: ci }) },
    stdout: "pipe",
    stderr: "pipe",
  })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ])
  return { output: stdout + stderr, exitCode }
}

const absent = "spool-no-such-tool"

describe("requireTool", () => {
  it("runs the test when the tool is on PATH, CI or not", async () => {
    for (const ci of [undefined, "true"]) {
      const r = await runToolTest("true", ci)
      expect(r.output).toContain("(pass) runs the tool")
      expect(r.exitCode).toBe(0)
    }
  })

  it("skips the test and prints why and how to install the tool when it is missing and CI is unset", async () => {
    const r = await runToolTest(absent, undefined)
    expect(r.output).toContain(`skipped "runs the tool": ${absent} is not installed (apt-get install the-tool)`)
    expect(r.output).toContain("(skip) runs the tool")
    expect(r.output).not.toContain("(pass)")
    expect(r.exitCode).toBe(0)
  })

  it("fails the test, saying what is missing, when the tool is missing and CI=true", async () => {
    const r = await runToolTest(absent, "true")
    expect(r.output).toContain(`${absent} is not installed (apt-get install the-tool): CI is set`)
    expect(r.output).toContain("(fail) runs the tool")
    expect(r.exitCode).toBe(1)
  })
})

describe("isCi", () => {
  it.each([
    [undefined, false],
    ["", false],
    ["0", false],
    ["false", false],
    ["FALSE", false],
    ["true", true],
    ["1", true],
    ["yes", true],
  ])("CI=%p is %p", (ci, expected) => {
    expect(isCi(ci === undefined ? {} : { CI: ci })).toBe(expected)
  })
})
