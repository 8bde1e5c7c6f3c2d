// The origins row of a landed broker delivery as both ledgers write it (sql/*/0006-origins.sql):
// its text made storable. Which landed pair already has an outcome is asked through the origins
// row's claim id (every outcome table indexes its claim_id): sqlite/schema.ts and
// postgres/landings.ts ask it in the same words, PostgreSQL's within its root.
import type { FailureOrigin, Landing } from "./model.ts"
import { toStorableText } from "./storable-text.ts"

/** The parameters of `insertOrigin` for a landing claimed as `claimId` at `now`. */
export function originParams(claimId: string, l: Landing, now: string): (string | null)[] {
  const o = l.origin
  const headers = o.headers !== undefined && Object.keys(o.headers).length > 0 ? JSON.stringify(o.headers) : null
  return [
    claimId,
    l.name,
    l.payloadHash,
    toStorableText(l.deliveryId),
    toStorableText(o.source),
    toStorableText(o.address),
    // JSON.stringify escapes U+0000 and lone surrogates: the text is storable as it is.
    headers,
    o.messageId === undefined ? null : toStorableText(o.messageId),
    now,
  ]
}

/** An origins row as both ledgers select it for `failureOrigin`. */
export interface FailureOriginRow {
  readonly claim_id: string
  readonly source: string
  readonly address: string
  readonly headers: string | null
  readonly message_id: string | null
}

/** The `FailureOrigin` of a selected row. */
export function toFailureOrigin(row: FailureOriginRow): FailureOrigin {
  const headers = row.headers === null ? undefined : (JSON.parse(row.headers) as Record<string, string>)
  return {
    claimId: row.claim_id,
    origin: {
      source: row.source,
      address: row.address,
      ...(headers !== undefined ? { headers } : {}),
      ...(row.message_id !== null ? { messageId: row.message_id } : {}),
    },
  }
}
