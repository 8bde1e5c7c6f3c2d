// `verify`: the integrity of a ledger's storage, as far as each backend can check it, then
// spool's own consistency rules, which read the tables without the indexes they check. What a
// check is and how its problems are counted is here; each adapter's verify.ts runs its checks.

/** The checks `verify` runs, in order. */
const ledgerCheckNames = ["integrity", "duplicate-msg-id", "duplicate-claim", "claim-without-consumer"] as const
type LedgerCheckName = (typeof ledgerCheckNames)[number]

/** One of spool's checks of a ledger, and what it found. */
export interface LedgerCheck {
  readonly name: LedgerCheckName
  /** What it looks at, in one line. */
  readonly description: string
  readonly status: "ok" | "failed" | "skipped"
  /** How many problems it found; `problems` holds the first `maxProblems`. */
  readonly found: number
  readonly problems: readonly string[]
  /** Why it was skipped. */
  readonly note?: string
}

/** How many problems of one check are kept for the report (all are counted). */
const maxProblems = 100

const spoolChecks: Record<Exclude<LedgerCheckName, "integrity">, string> = {
  "duplicate-msg-id": "no msg_id has two processed rows (a table scan, not the PRIMARY KEY's index)",
  "duplicate-claim": "no file has two claims rows (a table scan, not the PRIMARY KEY's index)",
  "claim-without-consumer": "every claim's owner has a consumers row",
}

/** A row of an adapter's verify.sql: one problem one of spool's checks found. */
export interface ProblemRow {
  readonly check_name: string
  readonly problem: string
}

/** Counts a check's problems and keeps the first few. */
export class Tally {
  #found = 0
  readonly #problems: string[] = []
  constructor(
    readonly name: LedgerCheckName,
    readonly description: string,
  ) {}
  add(problem: string): void {
    this.#found++
    if (this.#problems.length < maxProblems) this.#problems.push(problem)
  }
  result(): LedgerCheck {
    return {
      name: this.name,
      description: this.description,
      status: this.#found === 0 ? "ok" : "failed",
      found: this.#found,
      problems: this.#problems,
    }
  }
  skip(note: string): LedgerCheck {
    return { name: this.name, description: this.description, status: "skipped", found: 0, problems: [], note }
  }
}

/** A tally for each of spool's own checks, by name, in order. */
export function spoolTallies(): Map<string, Tally> {
  return new Map(Object.entries(spoolChecks).map(([name, d]) => [name, new Tally(name as LedgerCheckName, d)]))
}

/** An error's message, or the thrown value as text. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
