// Tests that spawn a program the machine may lack (promtool, the sqlite3 shell, psql, pgrep).
// A newcomer's machine runs the rest and says what was left out; CI installs every such program
// (.ci/run), so there a missing one is a broken setup, not a reason to pass.
import { it } from "bun:test"

/** A test function with `it`'s label, body and options. */
export type ToolTest = (...args: Parameters<typeof it>) => void

/** Whether CI is set to something other than empty, 0 or false, as CI services and .ci/run set it. */
export function isCi(env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  const ci = env.CI?.trim().toLowerCase()
  return ci !== undefined && ci !== "" && ci !== "0" && ci !== "false"
}

/**
 * `it` for tests that spawn `tool`; without it on PATH each such test is skipped with the reason
 * printed, or fails when CI is set, and `install` says how to get it (`apt-get install prometheus`).
 */
export function requireTool(tool: string, install: string): ToolTest {
  return Bun.which(tool) === null ? missingTest(`${tool} is not installed (${install})`, "installs every program") : it
}

/**
 * The test function for what `missing` says is absent: each test is skipped with that reason
 * printed, or fails when CI is set, since CI `provides` it ("installs every program").
 */
export function missingTest(missing: string, provides: string): ToolTest {
  if (isCi())
    return (label, _fn, options) =>
      it(
        label,
        () => {
          throw new Error(`${missing}: CI is set, and CI ${provides} the tests run`)
        },
        options,
      )
  return (label) => {
    console.warn(`skipped "${label}": ${missing}`)
    it.skip(label, () => {})
  }
}
