// What a kill of the real consume process left: which step of the protocol it interrupted,
// which files it caught in hand, and those kills summed up and written out. The kill storm
// (kills.ts) and the power-cut storm (power-cut-storm.ts) both record what they caught with it.
import { Database } from "bun:sqlite"
import fs from "node:fs"
import { join } from "node:path"
import { SQL } from "bun"

/** What the ledger and processing/ held right after a kill: which step of the protocol the kill interrupted. */
export interface KillObservation {
  /** The killed process. */
  readonly pid: number
  /** Time from spawn to kill. */
  readonly delayMs: number
  /** Files in processing/ (claimed, renamed, not yet moved out), whoever holds them. */
  readonly inProcessing: number
  /** Claim rows of the killed process not yet committed: it had a batch in hand. */
  readonly claimed: number
  /** Claim rows of the killed process committed whose file was still in processing/: the kill fell between commit and move. */
  readonly committedNotMoved: number
  /**
   * Files the killed process was retrying alone (an attempt counted, not yet committed), with
   * the attempts: a death with the file in hand, which is what the poison counter counts.
   */
  readonly inHandAlone: readonly { readonly name: string; readonly attempts: number }[]
  /** The killed process's uncommitted claim rows, as `name@attempts`. */
  readonly held: readonly string[]
  readonly inbox: number
}

/** What a kill of process `pid` left: its own claims in the ledger, and the queue directories. */
export async function observe(
  root: string,
  delayMs: number,
  pid: number,
  ledgerUrl?: string,
): Promise<KillObservation> {
  const processing = new Set(fs.readdirSync(join(root, "processing")))
  let claimed = 0
  let committedNotMoved = 0
  const inHandAlone: { name: string; attempts: number }[] = []
  const held: string[] = []
  for (const r of await claimStates(root, ledgerUrl)) {
    if (r.pid !== pid) continue
    if (r.state === "claimed") {
      claimed++
      held.push(`${r.name}@${r.attempts}`)
      if (r.attempts >= 2) inHandAlone.push({ name: r.name, attempts: r.attempts })
    } else if (processing.has(r.name)) committedNotMoved++
  }
  return {
    pid,
    delayMs,
    inProcessing: processing.size,
    claimed,
    committedNotMoved,
    inHandAlone,
    held,
    inbox: queued(root),
  }
}

/** How many entries `root`'s inbox/ holds. */
export const queued = (root: string) => fs.readdirSync(join(root, "inbox")).length

interface ClaimState {
  readonly name: string
  readonly state: string
  readonly attempts: number
  /** The owner's pid, from its consumers row. */
  readonly pid: number | null
}

const claimStatesSql =
  "SELECT c.name, c.state, c.attempts, o.pid FROM claims c LEFT JOIN consumers o ON o.owner_id = c.owner_id"

/** The claim rows of a root's ledger with their owners' pids (none if it has no ledger yet). */
async function claimStates(root: string, ledgerUrl?: string): Promise<ClaimState[]> {
  if (ledgerUrl !== undefined) {
    const sql = new SQL({ url: ledgerUrl, max: 1 })
    try {
      return (await sql.unsafe(claimStatesSql)).map((r: ClaimState) => ({
        ...r,
        pid: r.pid === null ? null : Number(r.pid),
      }))
    } catch {
      return [] // the kill can fall before the ledger's schema exists
    } finally {
      await sql.close()
    }
  }
  if (!fs.existsSync(join(root, "ledger.db"))) return []
  // Read-only: a read needs no write access, and the last connection to close a ledger read-write
  // checkpoints it, which would change what the next run finds.
  const db = new Database(join(root, "ledger.db"), { readonly: true })
  try {
    db.exec("PRAGMA busy_timeout = 10000")
    return db.query(claimStatesSql).all() as ClaimState[]
  } catch {
    return [] // the kill can fall before the ledger's schema exists
  } finally {
    db.close()
  }
}

/**
 * The files random kills made poison by design: each was in hand, retried alone, at enough
 * kills to reach the poison threshold (`--max-attempts`, at least 2; the first claim is the
 * batch's). A count is credited once: a claim adopted with the attempts of an earlier death
 * and killed before its own count is not a second death in hand.
 */
export function poisonedByKills(kills: readonly KillObservation[], maxAttempts = 3): string[] {
  const credited = new Map<string, number>()
  const highest = new Map<string, number>()
  for (const k of kills)
    for (const { name, attempts } of k.inHandAlone) {
      if (attempts <= (highest.get(name) ?? 1)) continue
      highest.set(name, attempts)
      credited.set(name, (credited.get(name) ?? 0) + 1)
    }
  const deaths = Math.max(maxAttempts, 2) - 1
  return [...credited].filter(([, n]) => n >= deaths).map(([name]) => name)
}

/**
 * The kills as lines a reader can follow: when each landed, what the killed process held, and
 * which files it had in hand alone; printed with a divergence, so a failing run can be studied.
 */
export function killLog(kills: readonly KillObservation[]): string[] {
  return kills.map((k, i) =>
    [
      `kill ${i + 1}: pid ${k.pid} at ${k.delayMs} ms`,
      `inbox=${k.inbox} processing=${k.inProcessing} claimed=${k.claimed} committed-not-moved=${k.committedNotMoved}`,
      k.inHandAlone.length > 0 ? `in hand alone: ${k.inHandAlone.map((f) => `${f.name}@${f.attempts}`).join(" ")}` : "",
      k.held.length > 0 && k.held.length <= 30 ? `held: ${k.held.join(" ")}` : "",
    ]
      .filter((s) => s !== "")
      .join("; "),
  )
}

/** Sums kill observations into the protocol windows they interrupted. */
export function summarizeKills(kills: readonly KillObservation[]) {
  return {
    kills: kills.length,
    inFlight: kills.filter((k) => k.claimed > 0).length,
    committedNotMoved: kills.filter((k) => k.committedNotMoved > 0).length,
    idle: kills.filter((k) => k.claimed === 0 && k.committedNotMoved === 0).length,
  }
}
