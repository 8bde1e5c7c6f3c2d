// The bench's account of where a contender's CPU goes (bench/cpu-split.ts): a process that
// spends CPU first on its main thread and then on a Worker has each share counted where it was
// spent. The child counts CPU time, not wall time, so a loaded machine only makes it longer.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { sampleCpu } from "../bench/cpu-split.ts"

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

describe.skipIf(!fs.existsSync("/proc/stat"))("bench CPU split", () => {
  it("counts the main thread's CPU and a Worker's apart", async () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-cpu-split-"))
    try {
      const script = join(dir, "spin.ts")
      fs.writeFileSync(script, child)
      const p = Bun.spawn(["bun", script], { stdout: "inherit", stderr: "inherit" })
      const sampler = sampleCpu([p.pid], true)
      expect(await p.exited).toBe(0)
      const split = sampler?.stop()
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
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
