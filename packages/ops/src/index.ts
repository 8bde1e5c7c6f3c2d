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
export type { Replayed } from "./replay.ts"
export { checkReplayable, checkReplayName, main as replay, replayFile } from "./replay.ts"
