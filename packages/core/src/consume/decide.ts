import fs from "node:fs"
import { join } from "node:path"
import { crashIfPoison } from "../_fault.ts"
import { type FileRead, type OpenDir, readMessageFile } from "../files.ts"
import type { Outcome } from "../ledger.ts"
import type { Message, MessageType, RejectReason } from "../message.ts"
import { alternateName } from "../names.ts"
import type { Item } from "./context.ts"

/**
 * Imports the message validator, which consume otherwise does when it first judges a message;
 * a long-running consumer (watch mode) calls it at start, not on the first file that arrives.
 */
export const loadValidator = () => import("../message.ts")

/** Reads each claimed file and judges it: accepted, or rejected with a reason. */
export class Decider {
  /** The validator and its module, imported when the first message is judged (see load). */
  #type: MessageType<Message> | undefined
  #message: typeof import("../message.ts") | undefined
  readonly #processing: OpenDir
  readonly #errorDir: string
  readonly #maxBytes: number
  readonly #buffer: Buffer

  constructor(type: MessageType<Message> | undefined, processing: OpenDir, errorDir: string, maxBytes: number) {
    this.#type = type
    this.#processing = processing
    this.#errorDir = errorDir
    this.#maxBytes = maxBytes
    this.#buffer = Buffer.allocUnsafe(Math.min(maxBytes, 64 * 1024 * 1024) + 1)
  }

  /**
   * Imports the validation module when the first message is judged, not with this module:
   * @ark/schema builds its intrinsic nodes at import (about 0.1 s), which a run that finds
   * nothing to do, the common case for a consumer started by cron, need not pay. arktype
   * itself is never imported unless the application passes its own type.
   */
  async load(): Promise<void> {
    if (this.#message !== undefined) return
    this.#message = await loadValidator()
    this.#type ??= this.#message.validateMessage
  }

  /** Reads (unless the I/O thread did) and judges one claimed file. */
  decide(item: Item): Outcome {
    return this.judge(item, this.read(item))
  }

  /** The claimed file's bytes: as the I/O thread read them, or read now. */
  read(item: Item): FileRead {
    const read =
      item.read ?? readMessageFile(this.#processing, item.name, item.isRegular === true, this.#maxBytes, this.#buffer)
    item.read = undefined
    return read
  }

  /** Judges one claimed file by what was read of it: accepted, rejected with a reason, or vanished. */
  judge(item: Item, read: FileRead): Outcome {
    if (!read.ok)
      return read.reason === "vanished"
        ? { kind: "vanished", name: item.name, claimId: item.claimId }
        : this.reject(item, read.reason, read.detail, null)
    const bytes = read.bytes
    crashIfPoison(item.name)
    const hash = item.hash ?? Bun.CryptoHasher.hash("sha256", bytes, "hex")
    item.hash = undefined
    const validation = this.#message as typeof import("../message.ts")
    const decoded = validation.decodeMessage(bytes, this.#type as MessageType<Message>)
    if (!decoded.ok) return this.reject(item, decoded.reason, decoded.detail, hash)
    const m = decoded.message
    return {
      kind: "accepted",
      name: item.name,
      claimId: item.claimId,
      msgId: m.msg_id,
      orderNo: m.order_no,
      seq: m.seq,
      amount: decoded.amountText ?? String(m.amount),
      hash,
      contentHash: Bun.CryptoHasher.hash("sha256", validation.canonicalContent(decoded.value, decoded.text), "hex"),
      message: m,
    }
  }

  reject(item: Item, reason: RejectReason, detail: string, hash: string | null): Outcome {
    return {
      kind: "rejected",
      name: item.name,
      claimId: item.claimId,
      destName: this.#freeName(item.name),
      reason,
      detail,
      hash,
    }
  }

  /** The first of name, name~1, name~2, ... that does not exist in error/. */
  #freeName(name: string): string {
    for (let k = 0; ; k++) {
      const candidate = k === 0 ? name : alternateName(name, k)
      // No exception for the usual answer: building one costs ~100 us here, once per rejection.
      if (fs.lstatSync(join(this.#errorDir, candidate), { throwIfNoEntry: false }) === undefined) return candidate
    }
  }
}
