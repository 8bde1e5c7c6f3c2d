import type { Log } from "../log.ts"
import type { Delivery, KeeperSpec } from "../source/port.ts"

// The main thread's handle on a source's keeper (see KeeperSpec in ../source/port.ts). With the
// SQLite ledger a batch's handler and commit run synchronously on the main thread, so a timer
// there cannot keep a batch alive past a broker's window; the keeper thread can. Started with the
// run, so that it is keeping before the first batch's handler runs; terminated when the run ends. While it is not working (not started yet,
// failed, gone) `isKeeping` is false and the source loop keeps its batches alive itself.

/** What the main thread asks of the keeper thread. */
export type KeeperRequest =
  | { readonly op: "open"; readonly module: string; readonly options: unknown; readonly everyMs: number }
  | { readonly op: "hold"; readonly batch: number; readonly tokens: readonly string[] }
  | { readonly op: "drop"; readonly batch: number }
  | { readonly op: "close" }

/** What the keeper thread tells the main thread. */
export type KeeperReport =
  | { readonly op: "ready" }
  | { readonly op: "failed"; readonly isFatal: boolean; readonly error: string }
  | { readonly op: "closed" }

/** How long a close waits for the keeper's connection to end before the thread is terminated. */
const closeWithinMs = 2000

/** A keeper thread for one run of the source loop. */
export class KeeperThread {
  #worker: Worker | undefined
  #isReady = false
  #isDead = false
  #next = 0
  #closed: (() => void) | undefined

  constructor(
    private readonly spec: KeeperSpec,
    private readonly everyMs: number,
    private readonly log: Log,
  ) {}

  /** Whether the thread is keeping the batches it holds alive. */
  get isKeeping(): boolean {
    return this.#isReady && !this.#isDead
  }

  /** Starts the thread, so that it is keeping by the time a batch is in hand. */
  start(): void {
    if (!this.#isDead) this.#start()
  }

  /**
   * Resolves once the thread keeps what it holds, has failed, or `withinMs` passed: a batch waits
   * for it before its handler may hold the main thread, whose timer keeps the batch meanwhile.
   */
  async untilReady(withinMs: number): Promise<void> {
    const deadline = performance.now() + withinMs
    while (!this.#isReady && !this.#isDead && performance.now() < deadline) await Bun.sleep(10)
  }

  /** Has the thread keep `deliveries` alive until `drop`; returns the handle to drop them by. */
  hold(deliveries: readonly Delivery[]): number | undefined {
    const tokens = deliveries.flatMap((d) => (d.keepToken === undefined ? [] : [d.keepToken]))
    if (this.#isDead || tokens.length === 0) return undefined
    const batch = ++this.#next
    this.#start().postMessage({ op: "hold", batch, tokens } satisfies KeeperRequest)
    return batch
  }

  /** Stops keeping the batch `hold` returned (undefined: one it did not take). */
  drop(batch: number | undefined): void {
    if (batch !== undefined && !this.#isDead) this.#worker?.postMessage({ op: "drop", batch } satisfies KeeperRequest)
  }

  /** Ends the thread: its connection closed, then the thread terminated. */
  async close(): Promise<void> {
    const worker = this.#worker
    if (worker === undefined) return
    if (!this.#isDead) {
      let timer: ReturnType<typeof setTimeout> | undefined
      await new Promise<void>((resolve) => {
        this.#closed = resolve
        timer = setTimeout(resolve, closeWithinMs)
        worker.postMessage({ op: "close" } satisfies KeeperRequest)
      })
      clearTimeout(timer)
    }
    this.#isDead = true
    worker.terminate()
  }

  #start(): Worker {
    if (this.#worker !== undefined) return this.#worker
    const worker = new Worker(new URL("./keeper-worker.ts", import.meta.url))
    worker.onmessage = (event: MessageEvent<KeeperReport>) => {
      const r = event.data
      if (r.op === "ready") this.#isReady = true
      else if (r.op === "closed") this.#closed?.()
      else {
        if (r.isFatal) {
          this.#isDead = true
          worker.terminate()
        }
        this.log.warn("keeper-failed", {
          error: r.error,
          problem: r.isFatal
            ? "the source's keeper thread could not start; deliveries in hand are kept alive from the main thread"
            : "a keep-alive from the keeper thread failed; it is sent again at the next round",
        })
      }
    }
    worker.onerror = (event) => {
      this.#isDead = true
      worker.terminate()
      this.log.warn("keeper-failed", {
        error: event.message,
        problem: "the source's keeper thread died; deliveries in hand are kept alive from the main thread",
      })
    }
    worker.unref()
    worker.postMessage({
      op: "open",
      module: this.spec.module,
      options: this.spec.options,
      everyMs: this.everyMs,
    } satisfies KeeperRequest)
    this.#worker = worker
    return worker
  }
}
