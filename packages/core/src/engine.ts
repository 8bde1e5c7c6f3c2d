// @spool/core/engine: what spool's own commands (packages/consumer, packages/ops) and the test
// applications that drive the engine directly import. It leaves out the message validator and
// what is built on it (schema inference, the typed consumer, the arktype Message): consume
// imports the validator (@ark/schema, about 0.1 s) when it judges its first message with an
// application's type, and meanwhile the I/O thread moves and reads the first batches; it never
// imports arktype (about 0.4 s and over 40 MB). An application imports "@spool/core".

export { wallClock, withTimeout } from "./clock.ts"
export { collectGarbageEvery } from "./collect.ts"
export { loadValidator } from "./consume/decide.ts"
export { consume } from "./consume/engine.ts"
export type { ConsumeOptions } from "./consume/options.ts"
export { defaults, maxMessageBytes } from "./consume/options.ts"
export type { ConsumeSummary } from "./consume/summary.ts"
export { emptySummary } from "./consume/summary.ts"
export { ExitCode, errnoOf, exitCodeFor, SpoolError } from "./errors.ts"
export type { Binding } from "./ledger/binding.ts"
export type { ClaimEntry, HistoryKeys, LedgerHistory } from "./ledger/history.ts"
export type {
  AcceptedOutcome,
  ClaimRow,
  DeletionDir,
  DeletionRecord,
  FailureOrigin,
  FailureRecord,
  LandedOrigin,
} from "./ledger/model.ts"
export { orderResultRows } from "./ledger/model.ts"
export type { OpenLedgerOptions } from "./ledger/open.ts"
export {
  checkRootLedger,
  openExistingLedger,
  openLedger,
  openPostgresLedger,
  openSqliteLedger,
  rebindRoot,
  resolveLedgerUrl,
} from "./ledger/open.ts"
export type { AnyEffect, LedgerPort } from "./ledger/port.ts"
export type { PostgresEffect } from "./ledger/postgres/ledger.ts"
export { redact } from "./ledger/postgres/ledger.ts"
export type { LedgerStats, StatsPeriod } from "./ledger/stats.ts"
export { emptyStats } from "./ledger/stats.ts"
export type { LedgerCheck } from "./ledger/verify.ts"
export type { Log, LogFormat, LogLevel } from "./log.ts"
export { createLog, isColorWanted } from "./log.ts"
export type { Message } from "./message/decode.ts"
export type { ErrorClass } from "./message/reasons.ts"
export { classOf, reasonNames } from "./message/reasons.ts"
export { writeFileAtomic } from "./queue/atomic-write.ts"
export { enqueueBytes, messageNameProblem, seedFrom, tooLargeInput } from "./queue/enqueue.ts"
export { renameNoReplace, unlinkDurably } from "./queue/files.ts"
export { alternateName, quoteName } from "./queue/names.ts"
export type { Queue, QueueDir } from "./queue/root.ts"
export {
  createQueue,
  isMessageName,
  judgeEntry,
  notADirectory,
  openQueue,
  queueDirs,
  resolveRoot,
} from "./queue/root.ts"
export { entryName, entryPath, entryShellName, scanDir } from "./queue/scan.ts"
export { Exposition, escapeLabel, formatNumber, writeTextfile } from "./report/metrics.ts"
export {
  formatOrderRanges,
  formatOrderResult,
  maxOrderResultRows,
  openFailuresIn,
  reportFiles,
  writeReports,
} from "./report/reports.ts"
export type { Backlog } from "./source/backlog.ts"
export { backlogTimeoutMs, describeSource, readBacklog } from "./source/backlog.ts"
export { openSource, sourceSchemes } from "./source/open.ts"
export type { Origin, SourcePort } from "./source/port.ts"
export { replayHeader } from "./source/port.ts"
export type { WatchOptions } from "./watch.ts"
export { watch } from "./watch.ts"
