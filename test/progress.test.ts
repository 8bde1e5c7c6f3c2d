import { describe, expect, it } from "bun:test"
import { join } from "node:path"
import { list, repoRoot, run, spool, tempQueue } from "@spool/test-support"

const consumeBin = join(repoRoot, "packages/consumer/bin/consume.ts")

const many = (n: number) =>
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [`p-${i}.json`, { msg_id: `p-${i}`, order_no: "O-1", seq: i + 1, amount: 1 }]),
  )

const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`

/**
 * Runs consume with stderr on a real pseudo-terminal: util-linux `script` gives the command a
 * pty and copies everything written to it (stdout and stderr alike) to its own stdout.
 */
function consumeOnTerminal(args: readonly string[], env: Record<string, string>) {
  const command = ["bun", consumeBin, ...args].map(quote).join(" ")
  return run(["script", "-qfec", command, "/dev/null"], { env: { TERM: "xterm", ...env } })
}

const frame = /\rconsume \[[#-]+\] +\d+\/61 +\d+% +[\d.]+ files\/s +ETA (\d+[smh]|--)/

describe("consume's progress bar", () => {
  it("is drawn on a terminal with a count, rate and ETA, then cleared before the summary", async () => {
    await using q = await tempQueue({ seed: { ...many(60), "bad.json": "{" } })
    const r = await consumeOnTerminal(["--root", q.root, "--batch-size", "5"], { NO_COLOR: "1" })
    expect(r.stdout).toMatch(frame)
    // The summary line starts where the bar was cleared (CR, then erase to end of line).
    const cleared = r.stdout.split("\r\x1b[K").slice(1)
    expect(cleared.find((l) => l.includes("msg=done"))).toMatch(
      /^time=\S+ level=notice msg=done files=61 processed=60 /,
    )
    // NO_COLOR: the bar is drawn with # and -, no colour codes.
    expect(r.stdout.replaceAll("\x1b[K", "")).not.toContain("\x1b[")
    // The log line for the bad file is on a line of its own, not glued to a frame.
    const logLine = r.stdout.split(/\r?\n/).find((l) => l.includes("msg=rejected file=bad.json"))
    // What the terminal shows after the last carriage return of that line: the log line alone.
    expect(logLine?.split("\r").at(-1)?.replace("\x1b[K", "")).toMatch(
      /^time=\S+ level=info msg=rejected file=bad\.json reason=parse/,
    )
    expect(r.exitCode).toBe(0)
    expect(list(join(q.root, "done"))).toHaveLength(60)
  })

  it("is coloured on a terminal when NO_COLOR is not set", async () => {
    await using q = await tempQueue({ seed: many(20) })
    const env: Record<string, string | undefined> = { ...process.env, TERM: "xterm" }
    delete env.NO_COLOR
    const command = ["bun", consumeBin, "--root", q.root, "--batch-size", "5"].map(quote).join(" ")
    const proc = Bun.spawn(["script", "-qfec", command, "/dev/null"], { env, stdout: "pipe", stderr: "pipe" })
    const out = await new Response(proc.stdout).text()
    expect(out).toContain("\x1b[32m")
    expect(await proc.exited).toBe(0)
  })

  it.each([
    ["--no-progress", ["--no-progress"]],
    ["--log-format json", ["--log-format", "json"]],
  ])("is not drawn on a terminal with %s", async (_label, args) => {
    await using q = await tempQueue({ seed: many(20) })
    const r = await consumeOnTerminal(["--root", q.root, "--batch-size", "5", ...args], { NO_COLOR: "1" })
    expect(r.stdout).not.toContain("files/s")
    expect(r.stdout).not.toContain("\r\x1b[K")
    expect(r.exitCode).toBe(0)
  })

  it("is not drawn when stderr is piped", async () => {
    await using q = await tempQueue({ seed: many(60) })
    const r = await spool("consume", ["--root", q.root, "--batch-size", "5"])
    expect(r.stdout).toBe("")
    expect(r.stderr).not.toContain("\r")
    expect(r.stderr).not.toContain("\x1b")
    expect(r.stderr).not.toContain("files/s")
    expect(r.stderr).toMatch(/^time=\S+ level=notice msg=done files=60 processed=60 /)
    expect(r.exitCode).toBe(0)
  })
})
