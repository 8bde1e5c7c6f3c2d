// The ledger port: what the engine, the reports and the operator commands ask of a ledger.
// It names no adapter and no driver: each adapter (sqlite/, postgres/) implements it, and
// open.ts is the one module that opens them.
import type { Owner } from "../queue/owner.ts"
import type { DeferPolicy } from "../transient.ts"
import type { HistoryKeys, LedgerHistory } from "./history.ts"
import type {
  AcceptedOutcome,
  Claim,
  ClaimRow,
  CompactSummary,
  ConflictRow,
  Deferral,
  DeletionDir,
  DeletionRecord,
  FailureOrigin,
  FailureRecord,
  Landing,
  OrderCheck,
  Outcome,
  ReplayRecord,
  Verdict,
} from "./model.ts"
import type { LedgerStats } from "./stats.ts"
import type { LedgerCheck } from "./verify.ts"

type Awaitable<T> = T | Promise<T>

/**
 * A business effect, as a ledger runs it inside its commit: each backend hands it its own
 * handle (SQLite's `Database`, a PostgreSQL transaction), which the port leaves unnamed. Every
 * backend's effect is one of these; the engine only hands an effect back to the ledger it came with.
 */
export type AnyEffect = (outcome: AcceptedOutcome, handle: never) => unknown

/**
 * What the consume engine, the reports and the operator commands need from a ledger; the
 * `SqliteLedger` (synchronous, embedded, the default: `LedgerPort<Effect>`) and the
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
  /**
   * Registers a consumer run. On SQLite it waits for no flush of the log: the log can be lost
   * only with the machine, which ends every consumer on it, and it is durable as a prefix, so a
   * registration reaches the disk before any claim of its owner (the next commit flushes both);
   * after the power comes back every owner from before is dead, with or without its row. On
   * PostgreSQL the server can crash alone: a registration lost there would leave a live
   * consumer's next claims naming an owner with no row, which others take for abandoned, so it
   * is flushed.
   */
  registerConsumer(owner: Owner, now: string): Awaitable<void>
  /**
   * Ends a consumer run: its committed claims and its row deleted, without waiting for a flush
   * on either ledger. Lost, it leaves what a crash just before it leaves: an owner that
   * recovery finds dead and forgets, and committed claims whose files have left processing/ (or
   * whose name a new file has taken there since: recovery tells it apart by what the claim
   * recorded of its file, as for a claim transaction's forgetting lost with it).
   */
  unregisterConsumer(ownerId: string): Awaitable<void>
  /** The consumers registered in this ledger (in this root, for PostgreSQL). */
  listConsumers(): Awaitable<Owner[]>
  /** Deletes the rows of these consumers that hold no claim (a row that still does is kept). */
  forgetConsumers(ownerIds: readonly string[]): Awaitable<void>
  /** Claims the free ones of `names`; the same transaction forgets `forget` (committed claims whose files have durably left processing/). */
  claim(ownerId: string, names: readonly string[], now: string, forget?: readonly Claim[]): Awaitable<Claim[]>
  /**
   * Claims landed broker deliveries as `claim` claims names: each free name's claim row with the
   * landing's attempts, and its origins row, in one transaction (which forgets `forget`),
   * committed durably before it returns when the ledger is durable: the engine lands the files
   * only after it, and a landed file must never outlive its rows.
   */
  claimLanded(ownerId: string, landings: readonly Landing[], now: string, forget?: readonly Claim[]): Awaitable<Claim[]>
  /**
   * Which of these landed (name, payload hash) pairs a commit has already given an outcome (a
   * processed, duplicates or failures row, or a deferral, under a claim that landed those bytes
   * under that name), as `landingKey`s: a redelivery of a delivery whose ack was lost.
   */
  committedLandings(pairs: readonly { readonly name: string; readonly payloadHash: string }[]): Awaitable<Set<string>>
  /**
   * Where the message of `file` in error/ came from, when a broker delivered it: the origins row
   * of its latest unreplayed failure's claim. Undefined when that failure has none (a file
   * dropped into inbox/) or there is no unreplayed failure under `file`.
   */
  failureOrigin(file: string): Awaitable<FailureOrigin | undefined>
  /**
   * Which of these claims landed a broker delivery, landed or picked up from deferred/ (an
   * origins row): such a file's home is its broker, not inbox/ (see consume/hand-back.ts).
   */
  landedClaims(claimIds: readonly string[]): Awaitable<Set<string>>
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
  /**
   * Takes over the listed claims still as listed, each returned as it is once taken, with the
   * record of the file a committed one committed (ClaimRow.payloadHash: its payload hash, or
   * its identity for a file judged unread): recovery checks that the file in processing/ is
   * that one before it moves it on.
   */
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
  /** The sources (URLs without their passwords) of the broker deliveries whose origins this root still keeps, sorted. */
  landedSources(): Awaitable<string[]>
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
   * The ledger's half of a deletion, around its unlink: in one transaction, serialized with
   * consumers, closes the latest open failure of `file` (error/) or forgets its deferrals row
   * (deferred/; refused as `in-use` while a consumer's claim holds it), logs the deletion, and
   * runs `remove` (the unlink, made durable) before COMMIT. A `remove` that throws rolls it back.
   */
  recordDeletion(file: string, dir: DeletionDir, now: string, remove: () => void): Awaitable<DeletionRecord>
  /**
   * Runs `fn` (which reads the ledger and writes the reports) under this root's report lock, so
   * writers of one root's reports run one after the other and the last report written reflects
   * every commit and move before it.
   */
  withReportLock<T>(fn: () => Promise<T>): Promise<T>
  /** The statistics of `stats`, read in one snapshot; the recent window starts at `since`. */
  stats(since: Date): Awaitable<LedgerStats>
  /**
   * The order problems as ranges (sql/order-ranges.sql), and, in the same snapshot, order-check.sql's
   * rows exactly as it gives them (one per duplicated or missing seq) when the ranges come to at
   * most `maxRows` of them: a consumer committing meanwhile cannot make it list more.
   */
  orderCheck(maxRows: number): Awaitable<OrderCheck>
  /**
   * Retention: forgets history (duplicates, closed failures, replays, deletions, origins) older than
   * `historyCutoff` and, when `keyCutoff` is given, processed rows (idempotency keys) older than
   * it, keeping each order's highest pruned seq in `horizon`. With `dryRun` the same statements
   * run and are rolled back: the counts are exactly what a real run removes.
   */
  compact(
    historyCutoff: string,
    keyCutoff: string | undefined,
    now: string,
    options?: { readonly dryRun?: boolean },
  ): Awaitable<CompactSummary>
  /** The backend's integrity check of its storage, then spool's consistency checks (`verify`). */
  verify(): Awaitable<LedgerCheck[]>
  close(): Awaitable<void>
}
