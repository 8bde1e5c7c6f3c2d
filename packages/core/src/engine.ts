// Everything of @spool/core but the message validator and what is built on it (schema
// inference, the typed consumer, the arktype Message): the import the CLIs start with.
// consume imports the validator (@ark/schema, about 0.1 s) when it judges its first message,
// and meanwhile the I/O thread moves and reads the first batches; it never imports arktype
// (about 0.4 s and over 40 MB). "@spool/core" re-exports all of this.

export { wallClock } from "./clock.ts"
export { collectGarbageEvery } from "./collect.ts"
export { loadValidator } from "./consume/decide.ts"
export { consume } from "./consume/engine.ts"
export type { ConsumeOptions } from "./consume/options.ts"
export { defaults } from "./consume/options.ts"
export type { ConsumeSummary } from "./consume/summary.ts"
export { emptySummary } from "./consume/summary.ts"
export type { SpoolErrorCode } from "./errors.ts"
export { ExitCode, errnoOf, exitCodeFor, SpoolError } from "./errors.ts"
export type { Binding, RootBinding } from "./ledger/binding.ts"
export { bindingFile, readBinding, writeBinding } from "./ledger/binding.ts"
export type {
  ClaimEntry,
  DuplicateRecord,
  FailureEntry,
  HistoryKeys,
  LedgerHistory,
  ProcessedRecord,
  ReplayEntry,
} from "./ledger/history.ts"
export type { AnyEffect, LedgerPort, OpenLedgerOptions } from "./ledger/port.ts"
export { checkRootLedger, openExistingLedger, openLedger, resolveLedgerUrl, rootId } from "./ledger/port.ts"
export type { PostgresEffect } from "./ledger/postgres/ledger.ts"
export { PostgresLedger, redact } from "./ledger/postgres/ledger.ts"
export type {
  AcceptedOutcome,
  Claim,
  ClaimRow,
  CompactSummary,
  ConflictRow,
  Effect,
  FailureRecord,
  LedgerOptions,
  OrderProblem,
  Outcome,
  ReplayRecord,
  Verdict,
} from "./ledger/sqlite/ledger.ts"
export { Ledger, schemaVersion } from "./ledger/sqlite/ledger.ts"
export type { LedgerStats, StatsPeriod } from "./ledger/stats.ts"
export { emptyStats } from "./ledger/stats.ts"
export type { LedgerCheck, LedgerCheckName } from "./ledger/verify.ts"
export { ledgerCheckNames, maxProblems } from "./ledger/verify.ts"
export type { Log, LogFormat, LogLevel, LogOptions } from "./log.ts"
export { createLog, isColorWanted, silentLog } from "./log.ts"
export type { ErrorClass, Reason } from "./message/reasons.ts"
export { classOf, reasons } from "./message/reasons.ts"
export type { Message } from "./message/validate.ts"
export type { EnqueueSummary } from "./queue/enqueue.ts"
export { enqueueBytes, seedFrom } from "./queue/enqueue.ts"
export { renameNoReplace, writeFileAtomic } from "./queue/files.ts"
export { alternateName, quoteName } from "./queue/names.ts"
export type { Liveness, Owner } from "./queue/owner.ts"
export { currentOwner, ownerLiveness } from "./queue/owner.ts"
export type { EntryFate, Queue, QueueDir } from "./queue/root.ts"
export {
  countFiles,
  createQueue,
  isMessageName,
  judgeEntry,
  openQueue,
  queueDirs,
  queuePaths,
  resolveRoot,
  scanDir,
} from "./queue/root.ts"
export type { Labels } from "./report/metrics.ts"
export { Exposition, escapeLabel, formatNumber, writeTextfile } from "./report/metrics.ts"
export { csvField, csvRow, formatOrderResult, reportFiles, writeReports } from "./report/reports.ts"
export type { DeferPolicy } from "./transient.ts"
export { backoffMs, defaultDeferPolicy, isTransient, TransientError } from "./transient.ts"
