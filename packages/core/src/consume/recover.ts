import fs from "node:fs"
import { join } from "node:path"
import { fault } from "../_fault.ts"
import { errnoOf } from "../errors.ts"
import type { Claim, ClaimRow } from "../ledger/model.ts"
import { renameNoReplaceAt } from "../queue/files.ts"
import { fileIdentity, hashFile, isFileIdentity } from "../queue/hash-file.ts"
import { clockNow } from "../queue/io-thread.ts"
import { ownerLiveness } from "../queue/owner.ts"
import { judgeEntry } from "../queue/root.ts"
import { scanDir } from "../queue/scan.ts"
import { commit, commitAlone } from "./commit.ts"
import { type Context, type Item, now } from "./context.ts"
import { landingClaimId } from "./land.ts"
import { moveHere, moveOut } from "./move.ts"
import { defaults } from "./options.ts"
import { countClaimed } from "./summary.ts"

/**
 * Takes back what dead consumers left. A committed claim only lacks its move: the file is
 * moved on, never processed again, so it is never counted as a duplicate. A claimed file
 * still in processing/ is processed again, alone (see retryAlone). A claimed file never
 * renamed is simply forgotten: it is still in inbox/. Orphans in processing/ (no claim row,
 * e.g. after a ledger restore) are claimed afresh and processed as a batch, by the rules of
 * inbox/ (judgeEntry): what those leave in inbox/, recovery leaves in processing/.
 */
export async function recover(c: Context): Promise<void> {
  fault("before-recovery")
  await removeAbandonedLandings(c)
  await adoptDead(c)
  await takeOrphans(c)
  await forgetDeadConsumers(c)
}

/**
 * Recovery while a run takes a broker's deliveries: what consumers that died since it started
 * left (their claims, their landings in tmp/), between two batches. Their deliveries come to
 * this run again, and their names would be held by the dead claims for as long as it runs.
 */
export async function recoverDeadPeers(c: Context): Promise<void> {
  await removeAbandonedLandings(c)
  await adoptDead(c)
  await forgetDeadConsumers(c)
}

async function forgetDeadConsumers(c: Context): Promise<void> {
  // The rows of consumers that died without unregistering (killed, or the machine rebooted),
  // now that their claims are taken: one per killed run, which a consumer started by cron
  // would otherwise leave forever. Only an owner this host can prove dead: one on another
  // host whose heartbeat is merely old may be slow, and a claim naming an owner without a
  // row counts as abandoned. The ledger keeps any row that still holds a claim.
  const me = c.owner.ownerId
  const gone = (await c.ledger.listConsumers()).filter((o) => o.ownerId !== me && ownerLiveness(o) === "dead")
  await c.ledger.forgetConsumers(gone.map((o) => o.ownerId))
}

/**
 * Removes the bodies a consumer killed mid-landing left under tmp/ (`<claimId>.land`, written
 * after their claims committed, never renamed into processing/): the broker delivers them again,
 * since nothing acknowledged them. Several consumers, on several hosts with PostgreSQL, may share
 * the root, so a file is removed only when no live owner holds its claim, judged as claims are
 * (adoptDead). tmp/ is read before the claims are listed: a landing file exists only once its
 * claim has committed, so a live landing's claim is always in the listing; and one whose claim
 * was finished since was renamed away before, and its removal finds nothing.
 */
async function removeAbandonedLandings(c: Context): Promise<void> {
  const leftovers = namesIn(c.queue.tmp).flatMap((name) => {
    const claimId = landingClaimId(name)
    return claimId === undefined ? [] : [{ name, claimId }]
  })
  if (leftovers.length === 0) return
  const held = new Set(
    (await c.ledger.listClaims())
      .filter((r) => r.ownerId === c.owner.ownerId || isOwnerAlive(c, r))
      .map((r) => r.claimId),
  )
  for (const { name, claimId } of leftovers) {
    if (held.has(claimId)) continue
    fs.rmSync(join(c.queue.tmp, name), { force: true })
    c.log.warn("recovered", { file: name, step: "landed under tmp/, never renamed; the broker delivers it again" })
  }
}

/** The names in a directory; none where it does not exist (a queue made by hand has no tmp/ until it lands something). */
function namesIn(dir: string): string[] {
  try {
    return fs.readdirSync(dir)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return []
    throw error
  }
}

/** Adopts the claims of dead owners: moves on what they committed, retries what they did not. */
async function adoptDead(c: Context): Promise<void> {
  const me = c.owner.ownerId
  const dead = (await c.ledger.listClaims()).filter((r) => r.ownerId !== me && !isOwnerAlive(c, r))
  const finished: ClaimRow[] = []
  const retry: Item[] = []
  const adopted = await c.ledger.adoptClaims(dead, me)
  const adoptedAt = clockNow()
  for (const row of adopted) {
    const inProcessing = exists(join(c.queue.processing, row.name))
    if (row.state === "claimed" && inProcessing) {
      retry.push({ name: row.name, claimId: row.claimId, attempts: row.attempts, inProcessing: true })
      continue
    }
    // Stalled for long since the takeover (see moveHeld): a claim taken over from this
    // consumer in turn is left, file and row, to the one that holds it now.
    if (clockNow() - adoptedAt > c.moveGuardMs && !(await c.ledger.holdsClaim(row.name, row.claimId, me))) continue
    if (row.state === "committed" && inProcessing && !isCommittedFile(c, row)) {
      c.log.warn("recovered", { file: row.name, step: "committed claim of an earlier file of this name; taken as new" })
      finished.push(row)
      continue
    }
    // A file gone by the time it is moved was moved by its owner after all: a consumer that
    // was only stalled, not dead, resuming between the listing and the move.
    if (
      row.state === "committed" &&
      inProcessing &&
      (await moveOut(c, row.name, row.dest ?? "done", row.destName ?? row.name, row.claimId))
    ) {
      c.log.warn("recovered", { file: row.name, step: "committed, not yet moved", dest: row.dest })
      c.summary.recovered++
    }
    finished.push(row)
  }
  if (finished.length > 0) {
    // The moves must be on disk before the rows that explain them are forgotten.
    c.sync("processing", "done", "error", "deferred")
    await c.ledger.dropClaims(finished)
  }
  for (const item of retry)
    c.log.warn("recovered", { file: item.name, step: "claimed, not committed", attempts: item.attempts })
  c.summary.recovered += retry.length
  await retryAlone(c, retry)
}

/**
 * Processes the files a dead consumer claimed and did not commit, one at a time in their
 * original order, counting each attempt in the ledger before the file is read. A crash is
 * thus pinned on the one file in hand, never on its batch-mates: a file becomes poison only
 * after `maxAttempts` claims of which at least one had it alone, and is then sent to error/
 * unread. Commits here are process-crash durable only; one flush makes them all durable
 * before the first file moves, so the Maildir rule holds at one fsync for the whole lot.
 */
async function retryAlone(c: Context, items: Item[]): Promise<void> {
  if (items.length === 0) return
  const me = c.owner.ownerId
  for (const item of items) c.inHand.add(item)
  countClaimed(c.summary, c.log, items)
  // An attempt counts a death with the file in hand: judged or committed. Importing the
  // validator (tens of ms, more under load) and reading the file cannot be the file's fault,
  // so both come before the count; a kill during either costs the file nothing.
  await c.decider.load()
  let firstCommitAt: number | undefined
  for (const item of items) {
    // Hashed, not judged (reading cannot be what crashed it): recovery tells this file from a
    // later one of its name by the hash (see isCommittedFile).
    if (item.attempts >= c.poisonAt)
      item.outcome = c.decider.reject(
        item,
        "poison",
        `no commit in ${item.attempts} attempts; the consumer died with it alone in hand on the last`,
        hashOrUnread(c, item.name),
      )
    else {
      const read = c.decider.read(item)
      fault("before-attempt")
      await c.ledger.startAttempt(item, me)
      item.isAttempted = true
      item.outcome = c.decider.judge(item, read)
    }
    const committedAt = await commitAlone(c, item)
    firstCommitAt ??= committedAt
  }
  await c.ledger.flush(me, now())
  await moveHere(c, items, firstCommitAt ?? clockNow())
}

/**
 * Claims and processes the files in processing/ that have no claim row at all, in batches,
 * by the inbox/ rules.
 */
async function takeOrphans(c: Context): Promise<void> {
  const me = c.owner.ownerId
  // Read the claims before the directory: a file that appears in processing/ meanwhile had
  // its claim row committed first, so claimOrphan's insert will conflict and skip it.
  const claimed = new Set((await c.ledger.listClaims()).map((r) => r.name))
  const orphans: Item[] = []
  const left: string[] = []
  const scanStart = Date.now()
  for (const e of scanDir(c.queue.processing)) {
    if (claimed.has(e.name)) continue
    // An orphan is taken by the inbox/ rules: what they leave in inbox/ stays here.
    const fate = judgeEntry(c.queue.processing, e.name, c.minAgeMs, scanStart)
    if (fate === "too-young") c.youngOrphans++
    else if (fate !== "take") left.push(e.name)
    if (fate !== "take") continue
    const claim = await c.ledger.claimOrphan(e.name, me, now())
    if (!claim) continue
    const pickup = !exists(join(c.queue.processing, e.name))
      ? "gone"
      : e.isFile()
        ? await returnLostPickup(c, claim)
        : "not-a-pickup"
    if (pickup !== "not-a-pickup") {
      // Finished by its owner between our listing and our claim, or returned to deferred/.
      await c.ledger.dropClaims([claim])
      continue
    }
    c.log.warn("recovered", { file: e.name, step: "orphan in processing/ with no claim" })
    c.summary.recovered++
    orphans.push({ ...claim, inProcessing: true, isRegular: e.isFile() })
  }
  noteLeftInProcessing(c, left)
  for (let i = 0; i < orphans.length; i += c.batchSize) {
    const batch = orphans.slice(i, i + c.batchSize)
    for (const item of batch) c.inHand.add(item)
    countClaimed(c.summary, c.log, batch)
    await moveHere(c, batch, await commit(c, batch))
  }
}

/**
 * An orphan may be a deferred file's pickup whose claim a power cut lost: the claim row (and
 * the deferrals row made the claim's) ride on the next commit, while the rename deferred/ ->
 * processing/ was made durable at once. Its deferrals row still names it, and deferred/ no
 * longer holds it. Such a file goes back to deferred/, its attempts and due time as they were,
 * rather than being taken afresh as a new delivery (which would defer it under a new name
 * beside its stale row). Runs while this consumer's claim on the name keeps any other pickup
 * of it out. "gone" when the file left processing/ meanwhile (finished by its owner).
 */
async function returnLostPickup(c: Context, claim: Claim): Promise<"returned" | "not-a-pickup" | "gone"> {
  const d = (await c.ledger.deferralsAt([claim.name])).get(claim.name)
  if (d === undefined || exists(join(c.queue.deferred, claim.name))) return "not-a-pickup"
  if (d.payloadHash !== undefined) {
    let hash: string | undefined
    try {
      hash = hashFile(c.dirs.processing, claim.name)
    } catch {
      return "not-a-pickup" // unreadable: the inbox/ rules judge it
    }
    if (hash !== d.payloadHash) return "not-a-pickup"
  }
  const moved = renameNoReplaceAt(c.dirs.processing, claim.name, c.dirs.deferred, claim.name)
  if (moved === "exists") return "not-a-pickup"
  if (moved === "missing") return "gone"
  // Durable before the claim that kept others out is dropped.
  c.sync("processing", "deferred")
  c.log.warn("recovered", { file: claim.name, step: "picked up from deferred/, its claim lost; back in deferred/" })
  c.summary.recovered++
  return "returned"
}

/**
 * Entries of processing/ already reported as left there, by directory and name: a watching
 * consumer recovers at every drain, and says so once, not every few seconds.
 */
const toldLeft = new Set<string>()

/** Says once per process and name that processing/ holds entries the inbox/ rules do not take. */
function noteLeftInProcessing(c: Context, names: readonly string[]): void {
  const processing = c.queue.processing
  const fresh = names.filter((n) => !toldLeft.has(`${processing}\0${n}`))
  if (fresh.length === 0) return
  for (const n of fresh) toldLeft.add(`${processing}\0${n}`)
  c.log.warn("left-in-processing", {
    count: names.length,
    file: fresh[0],
    problem:
      "processing/ holds entries with no claim whose names are not messages (hidden, not *.json, or not UTF-8); " +
      "left where they are, as in inbox/: move them out by hand",
  })
}

/**
 * Whether the file under a committed claim's name in processing/ is the one the claim
 * committed. Forgetting a moved file's claim rides, unflushed, on the next full commit (the
 * claim transaction, a run's unregistration), and a new file of the same name may be claimed
 * and renamed into processing/ (durably) before it: a power cut then brings the old committed
 * claim back over the new file. Moved on as committed, the new file would never be processed;
 * told apart by its payload hash (the whole file's, whatever --max-bytes says now), its stale
 * claim is dropped and it is taken as an orphan. A file judged unread (a link, a FIFO, a file
 * over the size limit) is told apart by its identity instead (inode, size and time); a claim
 * that recorded neither is taken at its word.
 */
function isCommittedFile(c: Context, row: ClaimRow): boolean {
  if (row.payloadHash === null) return true
  if (isFileIdentity(row.payloadHash)) {
    const identity = fileIdentity(c.dirs.processing, row.name)
    return identity === undefined || identity === row.payloadHash
  }
  const hash = hashFile(c.dirs.processing, row.name)
  // No regular file: gone meanwhile (its owner moved it after all; moveOut below finds it
  // missing), or an entry of another kind, which the committed file was not.
  return hash === undefined ? !exists(join(c.queue.processing, row.name)) : hash === row.payloadHash
}

/** A file's hash, or null when it cannot be read (this process may not: then it is known by its identity). */
function hashOrUnread(c: Context, name: string): string | null {
  try {
    return hashFile(c.dirs.processing, name) ?? null
  } catch (error) {
    if (errnoOf(error) === "EACCES" || errnoOf(error) === "EPERM") return null
    throw error
  }
}

function isOwnerAlive(c: Context, row: ClaimRow): boolean {
  if (row.owner === undefined) return false
  const liveness = ownerLiveness(row.owner)
  if (liveness !== "unknown") return liveness === "alive"
  return row.owner.heartbeatAgeMs < (c.options.leaseMs ?? defaults.leaseMs)
}

function exists(path: string): boolean {
  try {
    return fs.lstatSync(path, { throwIfNoEntry: false }) !== undefined
  } catch {
    return false
  }
}
