import type { FileRead } from "../files.ts"
import type { Claim, Outcome, Verdict } from "../ledger.ts"

/** A claimed file on its way through the protocol. */
export interface Item extends Claim {
  outcome?: Outcome
  committed?: boolean
  verdict?: Verdict
  /** readdir said it is a regular file; anything else is lstat-ed before it could be opened. */
  isRegular?: boolean
  /** true once the file is known to be in processing/; false when it is known not to be. */
  inProcessing?: boolean | undefined
  /** The file as the I/O thread read it, if it did, and the sha256 of its bytes. */
  read?: FileRead | undefined
  hash?: string | undefined
}
