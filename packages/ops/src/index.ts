export type { LagDetail, LagFormat, LagLimits, LagReport } from "./lag.ts"
export {
  formatJson,
  formatLine,
  formatLongLine,
  formatPrometheus,
  lagViolations,
  main as lag,
  measureLag,
  parseThreshold,
  scanAges,
} from "./lag.ts"
export type { BulkOptions, BulkOutcome, Replayed, Selection } from "./replay.ts"
export {
  checkReplayable,
  checkReplayName,
  main as replay,
  parseSelection,
  replayFile,
  replayFiles,
  selectFiles,
} from "./replay.ts"
