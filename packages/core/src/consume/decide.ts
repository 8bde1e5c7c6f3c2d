import fs from "node:fs"
import { join } from "node:path"
import { crashIfPoison } from "../_fault.ts"
import type { Outcome } from "../ledger/model.ts"
import { canonicalContent, type Decoded, decodeWith, type Message, type RejectReason } from "../message/decode.ts"
import { checkMessage } from "../message/rules.ts"
import type { MessageType } from "../message/validate.ts"
import { type FileRead, type OpenDir, readMessageFile } from "../queue/files.ts"
import { fileIdentity } from "../queue/hash-file.ts"
import { alternateName } from "../queue/names.ts"
import type { Item } from "./context.ts"

/**
 * Imports what judging with `type` needs: for an application's own type, the arktype half of
 * message validation (message/validate.ts, with @ark/schema), which consume otherwise does when it
 * first judges a message; a long-running consumer (watch mode) calls it at start, not on the
 * first file that arrives. spool's own rules (no type) need nothing imported.
 */
export async function loadValidator(type?: unknown): Promise<void> {
  if (type !== undefined) await import("../message/validate.ts")
}

/** Reads each claimed file and judges it: accepted, or rejected with a reason. */
export class Decider {
  /** The application's own validator, if it gave one; spool's rules (checkMessage) otherwise. */
  readonly #type: MessageType<Message> | undefined
  /** Decodes a file's bytes by the validator's rules; set by load. */
  #decode: ((bytes: Uint8Array) => Decoded<Message>) | undefined
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
   * Prepares the decoder before the first message is judged. An application's arktype type is
   * applied through message/validate.ts, imported only then: the default rules need no schema library.
   */
  async load(): Promise<void> {
    if (this.#decode !== undefined) return
    const type = this.#type
    if (type === undefined) this.#decode = (bytes) => decodeWith(bytes, checkMessage)
    else {
      const { decodeMessage } = await import("../message/validate.ts")
      this.#decode = (bytes) => decodeMessage(bytes, type)
    }
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
    const decoded = (this.#decode as (bytes: Uint8Array) => Decoded<Message>)(bytes)
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
      contentHash: Bun.CryptoHasher.hash("sha256", canonicalContent(decoded.value, decoded.text), "hex"),
      message: m,
    }
  }

  /**
   * Rejects one claimed file: it goes to error/ with `reason`. A file judged without its bytes
   * (no hash) is known by its identity instead, for recovery (ClaimRow.payloadHash).
   */
  reject(item: Item, reason: RejectReason, detail: string, hash: string | null): Outcome {
    const identity = hash === null ? fileIdentity(this.#processing, item.name) : undefined
    return {
      kind: "rejected",
      name: item.name,
      claimId: item.claimId,
      destName: this.#freeName(item.name),
      reason,
      detail,
      hash,
      ...(identity !== undefined && { identity }),
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
