// Commands run from inside a queue root, or below it, use that root (as git finds its
// repository): the alert text of docs/monitoring.md, "then replay.sh FILE", works from where the operator is.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { list, repoRoot, run, tempQueue } from "@spool/test-support"

const bad = { "ok.json": { msg_id: "m-1", order_no: "O", seq: 1, amount: 1 }, "bad.json": "{not json" }
const env = { SPOOL_ROOT: "", SPOOL_LEDGER_URL: "" }

describe("the queue root of the working directory", () => {
  it("is the root of consume, stats and replay.sh run inside it or below it", async () => {
    await using q = await tempQueue({ seed: bad })
    const consume = await run(["bun", join(repoRoot, "packages/consumer/bin/consume.ts")], { cwd: q.root, env })
    expect(consume.exitCode).toBe(0)
    expect(list(join(q.root, "error"))).toEqual(["bad.json"])
    const stats = await run(["bun", join(repoRoot, "packages/consumer/bin/stats.ts"), "--json"], {
      cwd: join(q.root, "done"),
      env,
    })
    expect(JSON.parse(stats.stdout).root).toBe(q.root)
    // From error/, where the operator looked at the file and corrected it (the bytes that
    // failed would only fail again).
    fs.appendFileSync(join(q.root, "error", "bad.json"), "\n")
    const replay = await run([join(repoRoot, "packages/ops/dist/replay.sh"), "bad.json"], {
      cwd: join(q.root, "error"),
      env,
    })
    expect(replay.stderr).toContain("moved error/bad.json back to inbox/bad.json")
    expect(replay.exitCode).toBe(0)
    expect(list(join(q.root, "inbox"))).toEqual(["bad.json"])
  })

  it("gives way to --root and SPOOL_ROOT, and is ./spool outside any root", async () => {
    await using q = await tempQueue({ seed: bad })
    await using other = await tempQueue({ seed: { "x.json": { msg_id: "m-9", order_no: "O", seq: 9, amount: 9 } } })
    const r = await run(["bun", join(repoRoot, "packages/consumer/bin/consume.ts")], {
      cwd: q.root,
      env: { ...env, SPOOL_ROOT: other.root },
    })
    expect(r.exitCode).toBe(0)
    expect(list(join(other.root, "done"))).toEqual(["x.json"])
    expect(list(join(q.root, "inbox")).sort()).toEqual(["bad.json", "ok.json"])
    const outside = await run(["bun", join(repoRoot, "packages/consumer/bin/consume.ts")], { cwd: q.path, env })
    expect(outside.exitCode).toBe(2)
    expect(outside.stderr).toContain(join(q.path, "spool"))
  })
})
