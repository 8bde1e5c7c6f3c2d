// The shipped unit file: systemd-analyze verify accepts it with no complaint, it restarts on a
// runtime failure but not on a usage error, and its ExecStart, run as systemd runs it, consumes.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { repoRoot, requireTool, run, tempDir, tempQueue } from "@spool/test-support"

const unitDir = join(repoRoot, "packaging/systemd")
const unit = fs.readFileSync(join(unitDir, "spool-consume@.service"), "utf8")
const envFile = fs.readFileSync(join(unitDir, "spool-consume.env"), "utf8")
const itWithSystemd = requireTool("systemd-analyze", "apt-get install systemd")

/** The values of `key` in the unit, in order. */
const values = (key: string) =>
  unit
    .split("\n")
    .filter((l) => l.startsWith(`${key}=`))
    .map((l) => l.slice(key.length + 1))

/** ExecStart's words as systemd splits them, with $VARIABLE words expanded from `env` (unset: dropped). */
function execStart(env: Record<string, string>): string[] {
  return (values("ExecStart")[0] ?? "")
    .split(/\s+/)
    .flatMap((w) => (w.startsWith("$") ? (env[w.slice(1)] ?? "").split(/\s+/).filter(Boolean) : [w]))
    .map((w) => w.replace("/opt/spool", repoRoot))
}

describe("packaging/systemd/spool-consume@.service", () => {
  itWithSystemd("passes systemd-analyze verify without a warning, as a template and as an instance", async () => {
    await using d = await tempDir()
    fs.copyFileSync(join(unitDir, "spool-consume@.service"), join(d.path, "spool-consume@.service"))
    for (const name of ["spool-consume@.service", "spool-consume@orders.service"]) {
      const r = await run(["systemd-analyze", "verify", "--man=no", join(d.path, name)], { cwd: d.path })
      expect({ name, stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode }).toEqual({
        name,
        stdout: "",
        stderr: "",
        exitCode: 0,
      })
    }
  })

  it("restarts on a runtime failure, never on a usage error, and waits for the network it asks for", () => {
    expect(values("Restart")).toEqual(["on-failure"])
    expect(values("RestartPreventExitStatus")).toEqual(["2"])
    expect(values("Wants")).toEqual(["network-online.target"])
    expect(values("After")[0]?.split(" ")).toContain("network-online.target")
    expect(values("EnvironmentFile")).toEqual(["/etc/spool/%i.env"])
    expect(values("KillSignal")).toEqual(["SIGTERM"])
  })

  it("ships an environment file that names the root", () => {
    expect(envFile).toMatch(/^SPOOL_ROOT=\/srv\/spool\/orders$/m)
    for (const l of envFile.split("\n")) expect(l === "" || l.startsWith("#") || /^[A-Z_]+=/.test(l)).toBe(true)
  })

  it("runs its ExecStart as systemd would: consumes, stops on SIGTERM with 0, and exits 2 on a root that is no queue", async () => {
    await using q = await tempQueue({ seed: { "a.json": { msg_id: "m-1", order_no: "O", seq: 1, amount: 1 } } })
    const argv = execStart({ SPOOL_CONSUME_OPTIONS: "--rescan 1s" })
    expect(argv.slice(0, 2)).toEqual(["/usr/bin/env", "bun"])
    const proc = Bun.spawn(argv, {
      cwd: repoRoot,
      env: { ...process.env, SPOOL_ROOT: q.root, SPOOL_LEDGER_URL: "" },
      stdout: "pipe",
      stderr: "pipe",
    })
    for (let i = 0; i < 600 && !fs.existsSync(join(q.root, "done", "a.json")); i++) await Bun.sleep(100)
    expect(fs.readdirSync(join(q.root, "done"))).toEqual(["a.json"])
    proc.kill("SIGTERM")
    expect(await proc.exited).toBe(0)
    const stderr = await new Response(proc.stderr).text()
    for (const line of stderr.trim().split("\n")) expect(() => JSON.parse(line)).not.toThrow()

    await using d = await tempDir()
    const bad = await run(execStart({}), { env: { SPOOL_ROOT: join(d.path, "typo"), SPOOL_LEDGER_URL: "" } })
    expect(bad.exitCode).toBe(2)
    expect(values("RestartPreventExitStatus")).toContain(String(bad.exitCode))
  })
})
