// The watch-latency producer, on a thread of its own (see watch-latency.ts): puts `total`
// messages into inbox/ at `rate` a second, the Maildir way, and posts back when each rename
// into inbox/ returned.
import fs from "node:fs"
import { join } from "node:path"
import { message } from "./generated-queue.ts"

declare const self: Worker

self.onmessage = async (e: MessageEvent<{ root: string; total: number; rate: number }>) => {
  const { root, total, rate } = e.data
  const arrivals: [string, number][] = []
  const started = performance.now()
  // Paced in 1 ms slices: at each slice, every message due by then is put in.
  for (let i = 0; i < total; ) {
    const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * rate) + 1)
    for (; i < due; i++) {
      const name = `w-${i.toString(36).padStart(6, "0")}.json`
      fs.writeFileSync(join(root, "tmp", name), message(10_000_000 + i))
      fs.renameSync(join(root, "tmp", name), join(root, "inbox", name))
      arrivals.push([name, performance.timeOrigin + performance.now()])
    }
    await Bun.sleep(1)
  }
  self.postMessage({ arrivals, seconds: (performance.now() - started) / 1000 })
}
