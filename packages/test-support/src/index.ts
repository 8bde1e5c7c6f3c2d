// Test support shared by test/, bench/ and scripts/torture.ts; production modules never import it.
export type { Consumer, GeneratedMix, KillObservation, KillRun } from "./chaos.ts"
export {
  consumeBin,
  consumeToEnd,
  consumeUntilDone,
  consumeWithRandomKills,
  diffIgnoringWinners,
  diffSnapshots,
  expectedAfterKills,
  generateMessages,
  killedAgainstReference,
  makeQueueFrom,
  poisonedByKills,
  rng,
  startConsume,
  summarizeKills,
  timeConsume,
  withoutWinners,
} from "./chaos.ts"
export type { Snapshot } from "./end-state.ts"
export { endState, list, snapshot } from "./end-state.ts"
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
export type { RunResult } from "./process.ts"
export { run, spool } from "./process.ts"
export { fixturesDir, repoRoot } from "./repo.ts"
export type { TempDir, TempQueue } from "./temp.ts"
export { tempDir, tempQueue } from "./temp.ts"
