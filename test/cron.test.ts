// Every cron line in docs/, run as written on a healthy queue: cron mails whatever a job
// prints, so a line that succeeds must print nothing at all.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot, run, tempDir, tempQueue } from "@spool/test-support"

const pages = fs.readdirSync(join(repoRoot, "docs")).filter((f) => f.endsWith(".md"))
const cronLines = pages.flatMap((page) =>
  fs
    .readFileSync(join(repoRoot, "docs", page), "utf8")
    .split("\n")
    .filter((l) => /^(\*|\*\/\d+) \* \* \* \* /.test(l))
    .map((l): [string, string] => [page, l.split(" ").slice(5).join(" ")]),
)

/** A queue in good health: valid messages and one a producer got wrong, which is an expected outcome. */
const seed = {
  "a.json": { msg_id: "m-a", order_no: "O-1", seq: 1, amount: 1 },
  "b.json": { msg_id: "m-b", order_no: "O-1", seq: 2, amount: 2.5 },
  "broken.json": "{not json",
}

describe("the cron lines in docs/", () => {
  it("are there: consume's, lag's and stats'", () => {
    const commands = cronLines.map(([, c]) => c)
    expect(commands.some((c) => c.includes(" consume "))).toBe(true)
    expect(commands.filter((c) => c.includes("lag.sh "))).toHaveLength(2)
    expect(commands.some((c) => c.includes(" stats "))).toBe(true)
  })

  it.each(cronLines)("%s: %s prints nothing on success", async (_page, command) => {
    await using q = await tempQueue({ seed })
    await using out = await tempDir()
    const env = { SPOOL_LEDGER_URL: "", SPOOL_ROOT: "" }
    if (!command.includes(" consume "))
      expect((await run(["bun", "run", "consume", "--root", q.root, "-q"], { env })).exitCode).toBe(0)
    const local = command
      .replaceAll("/opt/spool", repoRoot)
      .replaceAll("/srv/spool", q.root)
      .replaceAll("/var/spool/orders", q.root)
      .replaceAll("/var/lib/node_exporter/textfile", out.path)
    const r = await run(["/bin/sh", "-c", local], { env })
    expect({ stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode }).toEqual({
      stdout: "",
      stderr: "",
      exitCode: 0,
    })
    expect(fs.readdirSync(join(q.root, "error"))).toEqual(["broken.json"])
  })
})
