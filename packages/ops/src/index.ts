export type { Histogram, LagDetail, LagFormat, LagLimits, LagReport, PluginLimits, PluginVerdict } from "./lag.ts"
export {
  formatHistogram,
  formatJson,
  formatLine,
  formatLongLine,
  formatPlugin,
  formatPrometheus,
  isStalled,
  judgePlugin,
  lagViolations,
  main as lag,
  measureLag,
  PluginStatus,
  parseThreshold,
  scanQueueDir,
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
