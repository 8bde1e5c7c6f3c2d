// The SQLite ledger's deferrals rows as the engine reads them. SqliteLedger's methods call these
// with its prepared statements; its writes of them run in its transactions.
import { type Deferral, type RawDeferral, toDeferral } from "../model.ts"
import type { Statements } from "./schema.ts"

/** The deferrals due at `now`, earliest first, at most `limit`. */
export function dueDeferrals(s: Statements, now: string, limit: number): Deferral[] {
  return (s.dueDeferrals.all(now, limit) as RawDeferral[]).map(toDeferral)
}

/** The deferrals row a claim holds, if any. */
export function deferralOf(s: Statements, claimId: string): Deferral | undefined {
  const r = s.deferralOf.get(claimId) as RawDeferral | null
  return r === null ? undefined : toDeferral(r)
}

/** The deferrals rows of these names in deferred/, by name, each by its primary key. */
export function deferralsAt(s: Statements, files: readonly string[]): Map<string, Deferral> {
  const found = new Map<string, Deferral>()
  for (const file of files) {
    const r = s.deferralByFile.get(file) as RawDeferral | null
    if (r !== null) found.set(file, toDeferral(r))
  }
  return found
}
