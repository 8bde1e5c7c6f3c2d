// Why a file went to error/, and which class of failure each reason is: the one table the
// reports, stats, replay and docs/messages.md follow.
//
//   format    the bytes themselves are wrong: fix them at the source. Re-injecting the same
//             bytes fails the same way, so replay refuses an unchanged file (--force overrides).
//   business  the bytes were fine but could not be applied (a handler's rule, the horizon, a
//             crash, too long deferred): re-injectable once the data or the system is fixed.

/** Every reason a file can be in error/ for. */
const reasons = {
  parse: "format",
  "missing-field": "format",
  "invalid-field": "format",
  "too-large": "format",
  "not-regular": "format",
  symlink: "format",
  unreadable: "business",
  handler: "business",
  "beyond-horizon": "business",
  poison: "business",
  expired: "business",
} as const satisfies Record<string, ErrorClass>

/** The two classes of failure. */
export type ErrorClass = "format" | "business"

/** A reason a file can be in error/ for. */
export type Reason = keyof typeof reasons

/** Every reason, in the table's order (format ones first). */
export const reasonNames = Object.keys(reasons) as readonly Reason[]

/** The class of `reason`; a reason this spool does not know (written by a newer one) counts as business. */
export function classOf(reason: string): ErrorClass {
  return Object.hasOwn(reasons, reason) ? reasons[reason as Reason] : "business"
}
