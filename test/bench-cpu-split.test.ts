// The bench's account of where a contender's CPU goes (bench/cpu-split.ts): a process that
// spends CPU first on its main thread and then on a Worker has each share counted where it was
// spent. The child counts CPU time, not wall time, so a loaded machine only makes it longer.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { pgUnavailable, tempDatabase } from "@spool/test-support"
import { sampleCpu } from "../bench/cpu-split.ts"

// The bench counts the server's processes on this machine: the test needs the server here.
const pgHost = new URL(process.env.SPOOL_TEST_PG_URL || "postgres://127.0.0.1/").hostname
const pgSkip =
  (await pgUnavailable()) ??
  (["127.0.0.1", "localhost", "[::1]", ""].includes(pgHost)
    ? undefined
    : `the CPU split's server test skipped: the PostgreSQL server (${pgHost}) is not on this machine`)
if (pgSkip) console.warn(pgSkip)

/** Spins until this process has used `seconds` more CPU (its other threads are idle meanwhile). */
const spin = `(seconds) => { const end = process.cpuUsage().user + process.cpuUsage().system + seconds * 1e6; let x = 0; while (process.cpuUsage().user + process.cpuUsage().system < end) x++; return x }`

const child = `
const spin = ${spin}
spin(0.4)
const worker = new Worker(URL.createObjectURL(new Blob(["const spin = ${spin.replaceAll('"', '\\"')}; spin(0.4); postMessage(0)"])))
await new Promise((r) => { worker.onmessage = r })
worker.terminate()
// Alive past the sampler's next reading, so that the worker's last share is read.
await Bun.sleep(300)
`

/** Keeps its PostgreSQL backend busy until the backend has used 0.4 s of CPU (read from /proc). */
const withServer = (url: string) => `
const sql = new Bun.SQL(${JSON.stringify(url)})
const [{ pid }] = await sql\`SELECT pg_backend_pid() AS pid\`
const ticks = () => { const f = require("node:fs").readFileSync(\`/proc/\${pid}/stat\`, "utf8").split(") ")[1].split(" "); return Number(f[11]) + Number(f[12]) }
const end = ticks() + 40
while (ticks() < end) await sql\`SELECT count(*) FROM generate_series(1, 1000000)\`
// Alive past the sampler's next listing of /proc (once a second once another postgres process
// has appeared), so that a backend started between two listings is found.
await Bun.sleep(1200)
await sql.close()
`

/** Runs `script` as a bun process under the sampler; its split once it has exited. */
async function splitOf(script: string) {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-cpu-split-"))
  try {
    fs.writeFileSync(join(dir, "child.ts"), script)
    const p = Bun.spawn(["bun", join(dir, "child.ts")], { stdout: "inherit", stderr: "inherit" })
    const sampler = sampleCpu([p.pid], true)
    expect(await p.exited).toBe(0)
    return sampler?.stop()
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

describe.skipIf(!fs.existsSync("/proc/stat"))("bench CPU split", () => {
  it("counts the main thread's CPU and a Worker's apart", async () => {
    const split = await splitOf(child)
    expect(split).toBeDefined()
    if (split === undefined) return
    // 0.4 s each, less what a reading every 100 ms can miss of a thread that has ended.
    expect(split.main).toBeGreaterThanOrEqual(0.25)
    expect(split.workers).toBeGreaterThanOrEqual(0.25)
    expect(split.main).toBeLessThan(1)
    expect(split.workers).toBeLessThan(1)
    expect(split.server).toBeGreaterThanOrEqual(0)
    expect(split.busy).toBeGreaterThan(0)
    expect(split.busy).toBeLessThanOrEqual(1)
  })

  it("tells the largest process's anonymous memory from its mapped files", async () => {
    // 96 MB written (so resident), held past two readings, beside Bun's own executable.
    const split = await splitOf(
      "const held = Buffer.alloc(96 * 1024 * 1024, 1); await Bun.sleep(400); if (held[5] !== 1) process.exit(1)",
    )
    expect(split?.anonMb).toBeGreaterThanOrEqual(96)
    expect(split?.filesMb).toBeGreaterThan(5)
    expect(split?.filesMb).toBeLessThan(96)
  })

  // The backend starts after the sampler's first look at /proc, and the run is short.
  it.skipIf(pgSkip !== undefined)("counts the CPU of a PostgreSQL backend the process starts", async () => {
    await using db = await tempDatabase()
    const split = await splitOf(withServer(db.url))
    expect(split?.server).toBeGreaterThanOrEqual(0.3)
  })
})
