// Test support shared by test/, bench/ and scripts/torture.ts; production modules never import it.
export type { Consumer, GeneratedMix, KillObservation, KillRun, Snapshot } from "./chaos.ts"
export {
  consumeBin,
  consumeToEnd,
  consumeUntilDone,
  consumeWithRandomKills,
  diffIgnoringWinners,
  diffSnapshots,
  expectedAfterKills,
  generateMessages,
  makeQueueFrom,
  poisonedByKills,
  rng,
  startConsume,
  summarizeKills,
  timeConsume,
  withoutWinners,
} from "./chaos.ts"
export type { BoundedRun, LedgerKind, LedgerRows, TestLedger } from "./hostile.ts"
export {
  availableLedgers,
  consumeBounded,
  corpusEndState,
  ledgerRows,
  parseCsv,
  queueListing,
  readErrorCsv,
  testLedger,
} from "./hostile.ts"
export { pgUnavailable, tempDatabase } from "./postgres.ts"
export type { RunResult, TempDir, TempQueue } from "./support.ts"
export { endState, fixturesDir, list, repoRoot, run, snapshot, spool, tempDir, tempQueue } from "./support.ts"
