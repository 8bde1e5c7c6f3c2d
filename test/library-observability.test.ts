// What the library tells an application, on both ledgers, in-process: its log through the
// application's logger (pino's shape or a function), a handler's error with its stack in the
// outcome, the summary's counters named as consume's done line, and watch() of inbox/.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  type ConsumeSummary,
  createConsumer,
  createPostgresConsumer,
  type HandledOutcome,
  type LogFunction,
  type Logger,
  TransientError,
} from "@spool/core"
import { type BackendQueue, ledgerBackends, list } from "@spool/test-support"

const message = (id: string, seq: number) => ({ msg_id: id, order_no: "O", seq, amount: 1 })

interface Options {
  readonly logger?: Logger | LogFunction
  readonly onOutcome?: (o: HandledOutcome) => void
  readonly handle?: (m: { readonly msg_id: string }) => void
}

/** A consumer of `q` on its backend's ledger, with a handler that needs no database handle. */
async function consumerOf(q: BackendQueue, o: Options) {
  const common = {
    root: q.root,
    durable: false,
    rescanMs: 200,
    ...(o.logger && { logger: o.logger }),
    ...(o.onOutcome && { onOutcome: o.onOutcome }),
  }
  const handle = o.handle ?? (() => {})
  if (q.url === undefined) {
    const c = createConsumer({ ...common, handle: (m) => handle(m) })
    return { drain: () => c.drain(), watch: (s: AbortSignal) => c.watch(s), close: async () => c.close() }
  }
  const c = await createPostgresConsumer({ ...common, ledger: q.url, handle: async (m) => handle(m) })
  return { drain: () => c.drain(), watch: (s: AbortSignal) => c.watch(s), close: () => c.close() }
}

/** Polls `isDone` every 20 ms for at most `ms`. */
async function until(isDone: () => boolean, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms
  while (!isDone()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(20)
  }
}

for (const backend of await ledgerBackends())
  (backend.skip ? describe.skip : describe)(`what the library tells an application on ${backend.name}`, () => {
    it("logs through a pino-shaped logger, each method called on it as (fields, msg), a handler's throw as an error", async () => {
      await using q = await backend.queue({
        seed: { "a.json": message("m-a", 1), "bad.json": "{not json", "r.json": message("m-r", 2) },
      })
      const lines: [string, string, Record<string, unknown>][] = []
      class PinoLike implements Logger {
        readonly #lines = lines
        debug(fields: Record<string, unknown>, msg: string) {
          this.#lines.push(["debug", msg, fields])
        }
        info(fields: Record<string, unknown>, msg: string) {
          this.#lines.push(["info", msg, fields])
        }
        warn(fields: Record<string, unknown>, msg: string) {
          this.#lines.push(["warn", msg, fields])
        }
        error(fields: Record<string, unknown>, msg: string) {
          this.#lines.push(["error", msg, fields])
        }
      }
      const c = await consumerOf(q, {
        logger: new PinoLike(),
        handle: (m) => {
          if (m.msg_id === "m-r") throw new Error("refunds go elsewhere")
        },
      })
      await c.drain()
      await c.close()
      expect(lines).toContainEqual([
        "info",
        "rejected",
        expect.objectContaining({ file: "bad.json", reason: "parse", detail: expect.any(String) }),
      ])
      expect(lines).toContainEqual(["debug", "claimed", expect.objectContaining({ file: "a.json" })])
      const failed = lines.filter(([level]) => level === "error")
      expect(failed).toEqual([["error", "handler-failed", expect.objectContaining({ file: "r.json", msg_id: "m-r" })]])
      const err = failed[0]?.[2].err
      expect(err).toBeInstanceOf(Error)
      expect((err as Error).stack).toContain("refunds go elsewhere")
    })

    it("logs through a function as (level, msg, fields)", async () => {
      await using q = await backend.queue({ seed: { "bad.json": "{not json" } })
      const calls: [string, string, Record<string, unknown>][] = []
      const c = await consumerOf(q, { logger: (level, msg, fields) => void calls.push([level, msg, fields]) })
      await c.drain()
      await c.close()
      expect(calls).toContainEqual(["info", "rejected", expect.objectContaining({ file: "bad.json", reason: "parse" })])
    })

    it("reports a handler's error with its message and stack in the outcome", async () => {
      await using q = await backend.queue({
        seed: { "ok.json": message("m-ok", 1), "p2.json": message("m-2", 2), "later.json": message("m-3", 3) },
      })
      const seen: HandledOutcome[] = []
      const c = await consumerOf(q, {
        onOutcome: (o) => void seen.push(o),
        handle: (m) => {
          if (m.msg_id === "m-2") throw new Error("refunds go elsewhere")
          if (m.msg_id === "m-3") throw new TransientError("the bank is down")
        },
      })
      const summary = await c.drain()
      await c.close()
      const byFile = new Map(seen.map((o) => [o.file, o]))
      expect(byFile.get("ok.json")).toMatchObject({ verdict: "processed" })
      expect(byFile.get("ok.json")?.error).toBeUndefined()
      const rejected = byFile.get("p2.json")
      expect(rejected?.verdict).toBe("handler-rejected")
      expect(rejected?.error).toBeInstanceOf(Error)
      expect(rejected?.error?.message).toBe("refunds go elsewhere")
      expect(rejected?.error?.stack).toContain("library-observability.test.ts")
      expect(byFile.get("later.json")?.verdict).toBe("deferred")
      expect(byFile.get("later.json")?.error).toBeInstanceOf(TransientError)
      // The summary names what waits in deferred/ as consume's done line does.
      expect(list(join(q.root, "deferred"))).toEqual(["later.json"])
      expect(summary).toMatchObject({ processed: 1, rejected: 1, deferred: 1, tooYoung: 0 })
      expect("transient" in summary).toBe(false)
    })

    it("watches a directory queue until stopped, taking files that arrive meanwhile", async () => {
      await using q = await backend.queue({ seed: { "first.json": message("m-1", 1) } })
      const handled: string[] = []
      const c = await consumerOf(q, { handle: (m) => void handled.push(m.msg_id) })
      const stop = new AbortController()
      const watching: Promise<ConsumeSummary> = c.watch(stop.signal)
      await until(() => handled.includes("m-1"), "the first file")
      q.put("second.json", message("m-2", 2))
      q.put("bad.json", "{not json")
      await until(() => handled.includes("m-2") && list(join(q.root, "error")).length === 1, "the files put later")
      stop.abort()
      const summary = await watching
      await c.close()
      expect(summary).toMatchObject({ processed: 2, rejected: 1 })
      expect(list(join(q.root, "done"))).toEqual(["first.json", "second.json"])
      expect(fs.readFileSync(join(q.root, "error.csv"), "utf8")).toBe("file,reason\nbad.json,parse\n")
    })
  })
