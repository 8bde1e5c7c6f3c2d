import { SpoolError, type SpoolErrorCode } from "../errors.ts"

// The consume engine's second thread. Moving a file between queue directories is kernel work
// that no amount of batching removes (two renames per message, serialised by the kernel on
// the directories), and reading a message is three more system calls. On one thread they
// alternate with the ledger work; here a worker does the file work of one batch while the
// main thread judges and commits the previous one. The worker only moves and reads files:
// every decision and every ledger write stays on the main thread, in the protocol's order
// (claim rows before a rename into processing/, commit before a rename out of it). So do the
// directory fsyncs: the main thread makes a reply's renames durable before the step that
// depends on them, while the worker goes on renaming instead of waiting on the disk.

/** The queue directories the worker moves files between. */
export type IoDir = "inbox" | "processing" | "done" | "error"

export interface IoConfig {
  readonly dirs: Readonly<Record<IoDir, string>>
  readonly maxBytes: number
}

/** What became of each name a claimIn asked for. */
export const InStatus = { moved: 0, exists: 1, missing: 2, untried: 3 } as const

/** The result of moving a batch into processing/ and reading it. */
export interface ClaimInReply {
  /** One InStatus per name. */
  readonly status: Uint8Array
  /** The bytes read, back to back. */
  readonly data: ArrayBuffer
  /** Two per name: offset and length in `data`; offset -1 when the file was not read ahead. */
  readonly spans: Int32Array
  /** The sha256 (hex) of each file read ahead, 64 characters each, back to back (see hashAt). */
  readonly hashes: string
  /** Files judged without their content (or gone): [index, reason, detail]. */
  readonly rejects: readonly (readonly [
    number,
    "symlink" | "not-regular" | "too-large" | "unreadable" | "vanished",
    string,
  ])[]
  /** How many of the moved files had their reads started together, the batch found not in memory (read-ahead.ts). */
  readonly coldStarted: number
}

/** The sha256 (hex) of the i-th file of a claimIn, if it was read ahead. */
export function hashAt(reply: ClaimInReply, i: number): string | undefined {
  return (reply.spans[2 * i] as number) < 0 ? undefined : reply.hashes.slice(64 * i, 64 * i + 64)
}

/**
 * The result of moving a batch out of processing/: the files that got another name in error/,
 * and those no longer there to move (by index in the request).
 */
export interface MoveOutReply {
  readonly renamed: readonly (readonly [number, string])[]
  readonly missing: readonly number[]
  /** The index of the first move not made because the deadline had passed (see moveOut), if any. */
  readonly expiredAt?: number
}

/** Milliseconds on a clock both threads share (each thread's performance.now() has its own origin). */
export const clockNow = (): number => performance.timeOrigin + performance.now()

/** One move out of processing/: the name, the destination and the name wanted there. */
export type MoveOut = readonly [name: string, dest: "done" | "error", preferred: string]

// Lists cross the thread boundary as one string joined by NUL (a character no file name can
// hold): cloning one string costs a fraction of cloning a thousand.
export type IoRequest =
  | { readonly op: "init"; readonly id: number; readonly config: IoConfig }
  | {
      readonly op: "in"
      readonly id: number
      readonly names: string
      readonly regular: Uint8Array
      readonly readCount: number
      readonly readBytes: number
    }
  /** name, "done" or "error", preferred name; three fields per move. */
  | { readonly op: "out"; readonly id: number; readonly moves: string; readonly deadline: number }

export type IoResponse =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | {
      readonly id: number
      readonly ok: false
      readonly code: SpoolErrorCode | undefined
      readonly message: string
      /** For a failed claimIn: what became of each name before the failure. */
      readonly status?: Uint8Array | undefined
    }

/** A failure in the worker, with what the failed claimIn had already done. */
export class IoError extends SpoolError {
  constructor(
    code: SpoolErrorCode,
    message: string,
    readonly status: Uint8Array | undefined,
  ) {
    super(code, message)
  }
}

/**
 * The main thread's handle on the worker. Requests run one at a time in the order sent, so a
 * move out of processing/ sent after a claimIn runs after it.
 */
export class IoThread {
  readonly #worker: Worker
  readonly #waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>()
  #nextId = 0
  #failed: Error | undefined

  constructor(config: IoConfig) {
    this.#worker = new Worker(new URL("./io-worker.ts", import.meta.url))
    this.#worker.onmessage = (event: MessageEvent<IoResponse>) => {
      const r = event.data
      const w = this.#waiting.get(r.id)
      if (w === undefined) return
      this.#waiting.delete(r.id)
      if (r.ok) w.resolve(r.value)
      else w.reject(new IoError(r.code ?? "io", r.message, r.status))
    }
    this.#worker.onerror = (event) => {
      this.#failed = new SpoolError("io", `the consumer's I/O thread failed: ${event.message}`)
      for (const w of this.#waiting.values()) w.reject(this.#failed)
      this.#waiting.clear()
    }
    void this.#send({ op: "init", id: 0, config }).catch(() => {})
  }

  /**
   * Renames each name inbox/ -> processing/ (no-replace) and reads the first `readCount` of the
   * moved files, at most `readBytes` of them in all; the caller reads the rest, and fsyncs both
   * directories before it commits.
   */
  claimIn(names: readonly string[], regular: Uint8Array, readCount: number, readBytes: number): Promise<ClaimInReply> {
    return this.#send({
      op: "in",
      id: 0,
      names: names.join("\0"),
      regular,
      readCount,
      readBytes,
    }) as Promise<ClaimInReply>
  }

  /**
   * Renames each file out of processing/ (no-replace; a taken name in error/ becomes name~k);
   * a move not begun by `deadline` (clockNow's time) is left to the caller, who fsyncs the
   * directories before it forgets the claims.
   */
  moveOut(moves: readonly MoveOut[], deadline = Number.POSITIVE_INFINITY): Promise<MoveOutReply> {
    return this.#send({
      op: "out",
      id: 0,
      moves: moves.map((m) => m.join("\0")).join("\0"),
      deadline,
    }) as Promise<MoveOutReply>
  }

  /** Resolves when every request sent so far has finished, whatever its result. */
  async idle(): Promise<void> {
    await this.#send({ op: "out", id: 0, moves: "", deadline: Number.POSITIVE_INFINITY }).catch(() => {})
  }

  close(): void {
    this.#worker.terminate()
  }

  #send(request: IoRequest): Promise<unknown> {
    if (this.#failed !== undefined) return Promise.reject(this.#failed)
    const id = ++this.#nextId
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject })
      this.#worker.postMessage({ ...request, id })
    })
  }
}
