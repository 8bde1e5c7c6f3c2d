import fs from "node:fs"
import { join } from "node:path"
import { SpoolError } from "../errors.ts"
import { renameNoReplace } from "../queue/files.ts"
import type { Owner } from "../queue/owner.ts"
import type { Queue } from "../queue/root.ts"
import type { DeferPolicy } from "../transient.ts"
import { type Binding, checkBinding, type RootBinding, readBinding, writeBinding } from "./binding.ts"
import type { HistoryKeys, LedgerHistory } from "./history.ts"
import { type PostgresEffect, PostgresLedger, redact } from "./postgres/ledger.ts"
import { rootIdFile } from "./sqlite/files.ts"
import {
  type Claim,
  type ClaimRow,
  type CompactSummary,
  type ConflictRow,
  type Deferral,
  type Effect,
  type FailureRecord,
  Ledger,
  type OrderProblem,
  type Outcome,
  type ReplayRecord,
  type Verdict,
} from "./sqlite/ledger.ts"
import type { LedgerStats } from "./stats.ts"
import type { LedgerCheck } from "./verify.ts"

type Awaitable<T> = T | Promise<T>

/** A business effect, as each backend runs it inside its commit. */
export type AnyEffect = Effect | PostgresEffect

/**
 * What the consume engine, the reports and the operator commands need from a ledger; the
 * SQLite `Ledger` (synchronous, embedded, the default: `LedgerPort<Effect>`) and the
 * `PostgresLedger` (shared by consumers on many hosts: `LedgerPort<PostgresEffect>`) both
 * provide it. `E` is the effect its commit runs; the default, `never`, is a ledger whose
 * effect does not matter to the caller (reports, operator commands).
 */
export interface LedgerPort<E extends AnyEffect = never> {
  readonly backend: "sqlite" | "postgres"
  /**
   * Whether a commit that failed may still have committed: false where a failed transaction is
   * known to have rolled back (SQLite, in this process), true where the connection can be cut
   * after COMMIT was sent and only the server knows (PostgreSQL). Hand-back leaves an
   * uncommitted file of such a ledger to recovery, which reads the claim's state.
   */
  readonly isFailedCommitInDoubt: boolean
  registerConsumer(owner: Owner, now: string): Awaitable<void>
  unregisterConsumer(ownerId: string): Awaitable<void>
  /** The consumers registered in this ledger (in this root, for PostgreSQL). */
  listConsumers(): Awaitable<Owner[]>
  /** Deletes the rows of these consumers that hold no claim (a row that still does is kept). */
  forgetConsumers(ownerIds: readonly string[]): Awaitable<void>
  /** Claims the free ones of `names`; the same transaction forgets `forget` (committed claims whose files have durably left processing/). */
  claim(ownerId: string, names: readonly string[], now: string, forget?: readonly Claim[]): Awaitable<Claim[]>
  /** Gives up claims `ownerId` still holds; returns how many it held. */
  release(ownerId: string, claims: readonly Claim[]): Awaitable<number>
  /**
   * Commits a batch's outcomes, fenced: an outcome whose claim `ownerId` no longer holds records
   * nothing (`lost`). A property, not a method, so that its effect is checked contravariantly:
   * an effect written for the other backend does not type-check.
   */
  commit: (
    ownerId: string,
    outcomes: readonly Outcome[],
    now: string,
    effect?: E,
    policy?: DeferPolicy,
  ) => Awaitable<Verdict[]>
  /**
   * Claims due deferred files as `claim` claims names: each free one's claim row, and its
   * deferrals row made that claim's while it is still the one listed and still due.
   */
  claimDue(ownerId: string, due: readonly Deferral[], now: string, forget?: readonly Claim[]): Awaitable<Claim[]>
  /** The deferrals due at `now`, earliest first, at most `limit`. */
  dueDeferrals(now: string, limit: number): Awaitable<Deferral[]>
  /** When the earliest deferred file falls due; undefined when none waits. */
  nextDeferralAt(): Awaitable<string | undefined>
  /** The deferrals row a claim holds (the claim that deferred its file, or picked it up), if any. */
  deferralOf(claimId: string): Awaitable<Deferral | undefined>
  /** The deferrals rows of these names in deferred/, by name; a name without one is absent. */
  deferralsAt(files: readonly string[]): Awaitable<Map<string, Deferral>>
  /** Records the final name of a file in deferred/ when the chosen one was taken at move time. */
  renameDeferral(claimId: string, file: string): Awaitable<void>
  /** Forgets a picked-up deferrals row whose file was not in deferred/, and gives up its claim. */
  dropDeferral(claim: Claim, ownerId: string): Awaitable<void>
  /** How many deferrals rows there are, and how many of them are due at `now`. */
  deferralCounts(now: string): Awaitable<{ deferred: number; due: number }>
  listClaims(): Awaitable<ClaimRow[]>
  adoptClaims(rows: readonly ClaimRow[], ownerId: string): Awaitable<ClaimRow[]>
  startAttempt(claim: Claim, ownerId: string): Awaitable<Claim>
  /**
   * Takes back the attempt `startAttempt` counted on a claim still held and uncommitted: the
   * run failed cleanly (the ledger failed it), the file did not crash it. Returns whether it did.
   */
  uncountAttempt(claim: Claim, ownerId: string): Awaitable<boolean>
  lazily<T>(fn: () => T): T
  flush(ownerId: string, now: string): Awaitable<void>
  claimOrphan(name: string, ownerId: string, now: string): Awaitable<Claim | undefined>
  dropClaims(claims: readonly Claim[]): Awaitable<void>
  /** Whether `ownerId` still holds this claim: false once another consumer took it over, or it ended. */
  holdsClaim(name: string, claimId: string, ownerId: string): Awaitable<boolean>
  renameFailure(claimId: string, file: string): Awaitable<void>
  duplicateIds(): Iterable<string> | AsyncIterable<string>
  conflicts(): Iterable<ConflictRow> | AsyncIterable<ConflictRow>
  failureReason(file: string): Awaitable<string | undefined>
  /** The latest unreplayed failure recorded under `file` in error/ (what replay decides by); undefined when none. */
  unreplayedFailure(file: string): Awaitable<FailureRecord | undefined>
  /** `unreplayedFailure` of each of `files` that has one, in one read (list asks a directory chunk by chunk). */
  unreplayedFailures(files: readonly string[]): Awaitable<Map<string, FailureRecord>>
  /** Every row of this root matching `keys`: processed, duplicates, failures, replays, claims (`show`). */
  history(keys: HistoryKeys): Awaitable<LedgerHistory>
  /** The result the effect of `msgId`'s processing returned and the ledger stored; undefined when none. */
  resultOf(msgId: string): Awaitable<unknown>
  /** `failureReason` of every file this root has recorded in error/, in one read. */
  failureReasons(): Awaitable<Map<string, string>>
  /** How many replays this root has logged under `file` (a bulk replay's --max-replays count). */
  replayCount(file: string): Awaitable<number>
  /** Marks the latest unreplayed failure record of `file` replayed and logs the replay; false when it had none. */
  markReplayed(file: string, now: string): Awaitable<boolean>
  /**
   * The ledger's half of a replay, around its move: in one transaction, serialized with every
   * other replay of `file` in this root, refused (`too-often`, nothing written) when `maxReplays`
   * replays of it are logged already, else `markReplayed` and then `move` (the file's rename).
   * A `move` that throws rolls the mark back; a crash after it leaves the file in inbox/ with
   * its record unmarked, so the message is consumed again, never lost.
   */
  recordReplay(file: string, now: string, move: () => void, maxReplays?: number): Awaitable<ReplayRecord>
  /**
   * Runs `fn` (which reads the ledger and writes the reports) under this root's report lock, so
   * writers of one root's reports run one after the other and the last report written reflects
   * every commit and move before it.
   */
  withReportLock<T>(fn: () => Promise<T>): Promise<T>
  /** The statistics of `stats`, read in one snapshot; the recent window starts at `since`. */
  stats(since: Date): Awaitable<LedgerStats>
  orderProblems(): Awaitable<OrderProblem[]>
  compact(historyCutoff: string, keyCutoff: string | undefined, now: string): Awaitable<CompactSummary>
  /** The backend's integrity check of its storage, then spool's consistency checks (`verify`). */
  verify(): Awaitable<LedgerCheck[]>
  close(): Awaitable<void>
}

/** How to reach the ledger of a queue. */
export interface OpenLedgerOptions {
  /** A `postgres://` URL: use the shared PostgreSQL ledger instead of ROOT/ledger.db. */
  readonly url?: string | undefined
  readonly durable?: boolean
  /** How long a lock wait may last: SQLite's busy timeout, the lock_timeout of PostgreSQL sessions (default 10 s). */
  readonly busyTimeoutMs?: number
  readonly readonly?: boolean
  /** SQLite: start a new ledger even beside a queue root with history (see `LedgerOptions`). */
  readonly isNewLedgerAllowed?: boolean
}

/** The ledger URL from `--ledger`, else `SPOOL_LEDGER_URL`; undefined means SQLite in the root. */
export function resolveLedgerUrl(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const url = flag ?? (env.SPOOL_LEDGER_URL || undefined)
  if (url === undefined) return undefined
  if (!/^postgres(ql)?:\/\//.test(url))
    throw new SpoolError(
      "usage",
      `--ledger/SPOOL_LEDGER_URL takes a postgres:// URL (SQLite needs none: it lives in ROOT/ledger.db), not ${JSON.stringify(url)}`,
    )
  return url
}

/**
 * Opens the queue's ledger: the one the root is bound to (see binding.ts), SQLite in the root
 * or PostgreSQL at `url`. A URL where the root is bound to SQLite, none where it is bound to
 * PostgreSQL, or one that names another PostgreSQL ledger is refused (exit 2) before anything
 * is created. A writer records the binding the first time, so a root's first ledger is its own.
 */
export function openLedger(queue: Queue, options: OpenLedgerOptions & { readonly url: string }): Promise<PostgresLedger>
export function openLedger(queue: Queue, options?: OpenLedgerOptions): Promise<Ledger | PostgresLedger>
export async function openLedger(queue: Queue, options: OpenLedgerOptions = {}): Promise<Ledger | PostgresLedger> {
  const url = options.url
  if (url === undefined) return openSqliteLedger(queue, options)
  const bound = await checkRootLedger(queue, url)
  const id = options.readonly ? (readRootId(queue) ?? crypto.randomUUID()) : rootId(queue)
  const ledger = await PostgresLedger.open(url, id, {
    migrate: !options.readonly,
    ...(options.busyTimeoutMs !== undefined && { busyTimeoutMs: options.busyTimeoutMs }),
  })
  const b = bound?.binding
  if (!options.readonly && (bound?.isRecorded !== true || (b?.backend === "postgres" && b.ledgerId === undefined)))
    recordBinding(queue, { backend: "postgres", ledgerId: await ledger.ledgerId(), where: redact(url) }, ledger)
  return ledger
}

/**
 * `openLedger` for a command that must create nothing where there is no ledger yet (stats, a
 * dry run, a selection by failure reason): undefined when the root has none (no ROOT/ledger.db;
 * a database spool has never set up), and then nothing is created, in the root or the database.
 * The binding refusals apply as in openLedger.
 */
export async function openExistingLedger(
  queue: Queue,
  options: OpenLedgerOptions = {},
): Promise<Ledger | PostgresLedger | undefined> {
  const url = options.url
  if (url === undefined) {
    if (fs.existsSync(queue.ledger)) return openSqliteLedger(queue, options)
    checkBinding(queue.root, readBinding(queue.root), undefined, undefined)
    return undefined
  }
  await checkRootLedger(queue, url)
  return (await PostgresLedger.isSetUp(url)) ? openLedger(queue, { ...options, url }) : undefined
}

/**
 * `openLedger` without a URL, synchronously: the SQLite ledger in the root, by the same rules
 * (a root bound to PostgreSQL is refused with exit 2, a writer records the binding the first time).
 */
export function openSqliteLedger(queue: Queue, options: Omit<OpenLedgerOptions, "url"> = {}): Ledger {
  const bound = readBinding(queue.root)
  checkBinding(queue.root, bound, undefined, undefined)
  const ledger = Ledger.open(queue.ledger, {
    ...(options.durable !== undefined && { durable: options.durable }),
    ...(options.busyTimeoutMs !== undefined && { busyTimeoutMs: options.busyTimeoutMs }),
    ...(options.readonly !== undefined && { readonly: options.readonly }),
    ...(options.isNewLedgerAllowed !== undefined && { isNewLedgerAllowed: options.isNewLedgerAllowed }),
  })
  if (!options.readonly && bound?.isRecorded !== true) recordBinding(queue, { backend: "sqlite" }, ledger)
  return ledger
}

/**
 * Refuses (exit 2) a ledger other than the one the root of `queue` is bound to: `url`, or the
 * SQLite ledger in the root when undefined. A PostgreSQL ledger's identity is read without
 * creating or changing anything, so a wrong database is refused untouched. Returns the binding.
 */
export async function checkRootLedger(queue: Queue, url: string | undefined): Promise<RootBinding | undefined> {
  const bound = readBinding(queue.root)
  const b = bound?.binding
  // The database is asked only when its identity decides: a SQLite root refuses any URL unasked.
  const needsId = url !== undefined && b?.backend === "postgres" && b.ledgerId !== undefined
  checkBinding(queue.root, bound, url, needsId ? await PostgresLedger.identify(url) : undefined)
  return bound
}

/** Records a root's binding once its ledger is open; a failure closes that ledger and is the open's. */
function recordBinding(queue: Queue, binding: Binding, ledger: Ledger | PostgresLedger): void {
  try {
    writeBinding(queue.root, binding)
  } catch (error) {
    void ledger.close()
    throw error
  }
}

/**
 * The queue root's identity in a shared ledger: a random id kept in ROOT/.spool-root-id,
 * created once (no-replace, so two consumers starting at once agree on it). Roots on several
 * hosts have different ids, so their file names never collide in the ledger; consumers on
 * several hosts sharing one root (a network filesystem) share its id and so its claims.
 */
export function rootId(queue: Queue): string {
  const path = join(queue.root, rootIdFile)
  const read = () => fs.readFileSync(path, "utf8").trim()
  const found = readRootId(queue)
  if (found !== undefined) return found
  // Beside the target, not in tmp/: a queue made by hand may have only the four directories.
  const tmp = join(queue.root, `${rootIdFile}.${process.pid}.${crypto.randomUUID()}.tmp`)
  fs.writeFileSync(tmp, `${crypto.randomUUID()}\n`, { mode: 0o644 })
  try {
    renameNoReplace(tmp, path)
  } finally {
    fs.rmSync(tmp, { force: true })
  }
  return read()
}

/**
 * The root's id if it has one. A reader of a shared ledger does not create it: the id file
 * counts as history (a root with one is taken for a PostgreSQL-bound root), and a root without
 * one has written nothing to any shared ledger, so a new id, kept nowhere, finds all of its
 * rows there: none.
 */
function readRootId(queue: Queue): string | undefined {
  try {
    return fs.readFileSync(join(queue.root, rootIdFile), "utf8").trim()
  } catch {
    return undefined
  }
}
