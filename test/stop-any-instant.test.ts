// A stop signal at any instant of a run, from the moment the process is spawned to its end.
// The commands catch SIGINT, SIGTERM and SIGHUP before they load anything, so a run ends with
// a code the README documents for a stopped run, with nothing left in processing/. The one
// instant no program can catch a signal in is the runtime's own start, before its first
// statement: then the signal's default action ends the process, and by then nothing can have
// been touched. The delays start at 0 and grow until a run ends before its signal, so they
// cover a whole run however fast or slow the machine is; that holds as well while the other
// cases run beside it, on their own roots, which is why they may.
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  consumeToEnd,
  diffIgnoringWinners,
  diffSnapshots,
  generateMessages,
  list,
  makeQueueFrom,
  repoRoot,
  type Snapshot,
  snapshot,
  startConsume,
  type TempDir,
  tempDir,
} from "@spool/test-support"

const compactBin = join(repoRoot, "packages/consumer/bin/compact.ts")
const signals = ["SIGTERM", "SIGINT", "SIGHUP"] as const

/** 0, 5, 10, ... 45 ms, then a third longer each time: the whole start-up finely, then the rest of a run. */
const nextDelay = (ms: number) => (ms < 45 ? ms + 5 : Math.round(ms * 1.33))

/** Files of each queue directory, as names. */
function dirs(root: string) {
  const of = (d: string) => list(join(root, d))
  return { inbox: of("inbox"), processing: of("processing"), done: of("done"), error: of("error") }
}

/** A process's end: its exit code, or the signal that ended it. */
async function ended(proc: Bun.Subprocess) {
  await proc.exited
  return { exitCode: proc.exitCode, signalCode: proc.signalCode === null ? null : String(proc.signalCode) }
}

describe.concurrent("a stop signal at any instant", () => {
  let t: TempDir
  let src: string
  let total: number
  /** The queue consumed once without a signal; it stays as it is. */
  let consumedOnce: string
  let reference: Snapshot

  beforeAll(async () => {
    t = await tempDir()
    src = join(t.path, "src")
    generateMessages(src, 30, 11)
    total = list(src).length
    consumedOnce = join(t.path, "ref")
    makeQueueFrom(src, consumedOnce)
    await consumeToEnd(consumedOnce)
    reference = snapshot(consumedOnce)
  }, 60_000)
  afterAll(() => t[Symbol.asyncDispose](), 60_000)

  /** The state a run stopped by the signal's default action must leave: untouched, no ledger. */
  function expectUntouched(root: string) {
    expect(dirs(root)).toEqual({ inbox: list(src), processing: [], done: [], error: [] })
    expect(fs.existsSync(join(root, "ledger.db"))).toBe(false)
  }

  const modeArgs = { "one-shot": [], "--watch": ["--watch"], "--concurrency 2": ["--concurrency", "2"] } as const
  for (const mode of ["one-shot", "--watch", "--concurrency 2"] as const)
    it(`ends ${mode} consume with its documented code whenever it comes, and a rerun ends as an uninterrupted run`, async () => {
      const args = ["--batch-size", "5", ...modeArgs[mode]]
      // Covered once a run ended before its signal; a watching run never ends by itself, so
      // once it is signalled a second after it has drained.
      let isCovered = false
      let i = 0
      for (let delay = 0; !isCovered && i < 60; delay = nextDelay(delay), i++) {
        const root = join(t.path, `${mode}-${i}`)
        makeQueueFrom(src, root)
        const signal = signals[i % signals.length] as (typeof signals)[number]
        const c = startConsume(root, args)
        if (delay > 0) await Bun.sleep(delay)
        if (c.proc.exitCode !== null) isCovered = true
        else c.proc.kill(signal)
        const r = await c.finished
        const at = `${signal} ${delay} ms after the start: ${r.stderr}`
        if (r.signalCode !== null) {
          expect(r.signalCode, at).toBe(signal)
          // Untouched, so a rerun is an uninterrupted run.
          expectUntouched(root)
          continue
        }
        expect(dirs(root).processing, at).toEqual([])
        if (mode === "--watch") expect(r.exitCode, at).toBe(0)
        else if (dirs(root).inbox.length > 0) expect(r.exitCode, at).toBe(4)
        // With two workers, one stopped with files in its view says 4 even when the other then
        // drains what was left: stopped by the signal, and nothing waits.
        else expect(mode === "--concurrency 2" ? [0, 4] : [0], at).toContain(r.exitCode ?? -1)
        if (mode === "--watch" && delay > 1000 && dirs(root).done.length + dirs(root).error.length === total)
          isCovered = true
        await consumeToEnd(root)
        // Two workers may let another delivery of a msg_id win; nothing else may differ.
        const diff = mode === "--concurrency 2" ? diffIgnoringWinners : diffSnapshots
        expect(diff(reference, snapshot(root))).toEqual([])
        fs.rmSync(root, { recursive: true, force: true })
      }
      expect(isCovered).toBe(true)
    }, 600_000)

  it("ends a --concurrency run stopped while its workers start as stopped, not as if a worker had been killed", async () => {
    const root = join(t.path, "workers-starting")
    makeQueueFrom(src, root)
    const c = startConsume(root, ["--concurrency", "2", "--batch-size", "5"])
    // The moment the workers exist, before they can have caught anything: the signal passed on
    // to them may end them by its default action, which touches nothing.
    for (let i = 0; i < 3000; i++) {
      if (
        Bun.spawnSync(["pgrep", "-P", String(c.proc.pid)])
          .stdout.toString()
          .trim() !== ""
      )
        break
      if (c.proc.exitCode !== null) break
      await Bun.sleep(1)
    }
    c.proc.kill("SIGTERM")
    const r = await c.finished
    expect(r.stderr).not.toMatch(/worker-failed[^\n]* signal=SIG/)
    expect(dirs(root).processing).toEqual([])
    // As above: a worker stopped with files in its view says 4 even when the other drains them.
    if (dirs(root).inbox.length > 0) expect(r.exitCode).toBe(4)
    else expect([0, 4]).toContain(r.exitCode ?? -1)
    await consumeToEnd(root)
    expect(diffIgnoringWinners(reference, snapshot(root))).toEqual([])
  }, 120_000)

  it("stops compact with 0 or 4 whenever it comes, and a rerun archives the rest and prunes", async () => {
    const later = { SPOOL_CLOCK_OFFSET: "+91d" }
    let hasRunEnded = false
    let i = 0
    for (let delay = 0; !hasRunEnded && i < 60; delay = nextDelay(delay), i++) {
      const root = join(t.path, `compact-${i}`)
      // What compact starts from is the queue a run without a signal left: one such run, copied.
      fs.cpSync(consumedOnce, root, { recursive: true, preserveTimestamps: true })
      const consumed = dirs(root)
      const signal = signals[i % signals.length] as (typeof signals)[number]
      const proc = Bun.spawn(["bun", compactBin, "--root", root, "--older-than", "90d"], {
        env: { ...process.env, ...later },
        stdio: ["ignore", "ignore", "ignore"],
      })
      if (delay > 0) await Bun.sleep(delay)
      if (proc.exitCode !== null) hasRunEnded = true
      else proc.kill(signal)
      const r = await ended(proc)
      const at = `${signal} ${delay} ms after the start`
      if (r.signalCode !== null) {
        expect(r.signalCode, at).toBe(signal)
        expect(dirs(root), at).toEqual(consumed)
      } else expect([0, 4], at).toContain(r.exitCode as number)
      const again = Bun.spawnSync(["bun", compactBin, "--root", root, "--older-than", "90d"], {
        env: { ...process.env, ...later },
      })
      expect(again.exitCode, again.stderr.toString()).toBe(0)
      expect(dirs(root).done).toEqual([])
      const [archive] = list(join(root, "archive"))
      expect(list(join(root, "archive", archive as string))).toEqual(consumed.done)
      fs.rmSync(root, { recursive: true, force: true })
    }
    expect(hasRunEnded).toBe(true)
  }, 600_000)
})
