// The queue and the server the console's tests share: processed, duplicate, failed (hostile
// names among them) and deferred messages, made by the real consume and a library application,
// and `spool serve` as a real process.
import { expect } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { type BackendQueue, hostileNames, run } from "@spool/test-support"

/** The spool command's entry point. */
export const spoolBin = join(import.meta.dir, "..", "packages/spool/bin/spool.ts")
const transientApp = join(import.meta.dir, "apps", "transient.ts")

/** Chromium offline and quiet: no sandbox (root in a container), no GPU, nothing fetched in the background. */
export const chromiumFlags = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
]

/** The hostile-name corpus, each failed in the shared queue. */
export { hostileNames }

/** Fills `q`: 2 processed messages, 1 duplicate, broken.json and the hostile names failed, 1 deferred message. */
export async function populate(q: BackendQueue): Promise<void> {
  q.put("a.json", { msg_id: "m-1", order_no: "O", seq: 1, amount: 1 })
  q.put("b.json", { msg_id: "m-2", order_no: "O", seq: 2, amount: 2 })
  q.put("again.json", { msg_id: "m-1", order_no: "O", seq: 1, amount: 1 })
  q.put("broken.json", "not json")
  for (const name of hostileNames) q.put(name, "<i>not json</i>")
  const consumed = await q.command("consume")
  expect(consumed.exitCode).toBe(0)
  q.put("later.json", { msg_id: "m-9", order_no: "P", seq: 1, amount: 9 })
  const down = join(q.root, "..", "down")
  fs.writeFileSync(down, "")
  const deferred = await run(["bun", transientApp, q.root], {
    env: { ...q.env, DOWN: down, DEFER_FIRST_MS: "3600000" },
  })
  expect(deferred.exitCode).toBe(0)
}

/** A running `spool serve` and the URL it listens on; disposing of it ends the process. */
export interface Served extends AsyncDisposable {
  readonly url: string
  /** What it wrote on stderr so far. */
  stderr(): string
}

/** Starts `spool serve --root ROOT --port 0 ARGS...` and waits for the line that gives its URL. */
export async function startServe(
  root: string,
  args: readonly string[] = [],
  env: Record<string, string> = {},
): Promise<Served> {
  const proc = Bun.spawn(["bun", spoolBin, "serve", "--root", root, "--port", "0", ...args], {
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdout: "ignore",
    stderr: "pipe",
    stdin: "ignore",
  })
  const reader = proc.stderr.getReader()
  let said = ""
  const decoder = new TextDecoder()
  while (!/ on (http:\S+)/.test(said)) {
    const { value, done } = await reader.read()
    if (done) throw new Error(`spool serve ended before listening: ${said}`)
    said += decoder.decode(value, { stream: true })
  }
  // Keep reading, so that the log lines of later requests can be asserted.
  void (async () => {
    for (;;) {
      const { value, done } = await reader.read()
      if (done) return
      said += decoder.decode(value, { stream: true })
    }
  })()
  return {
    url: / on (http:\S+)/.exec(said)?.[1] ?? "",
    stderr: () => said,
    async [Symbol.asyncDispose]() {
      proc.kill()
      await proc.exited
    },
  }
}
