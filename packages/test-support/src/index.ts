// Test support shared by test/, bench/ and scripts/torture.ts; production modules never import it.
export type { Backend, BackendQueue, LedgerCommand, QueueTemplate, SqlValue } from "./backends.ts"
export { ledgerBackends, templateOf } from "./backends.ts"
export {
  diffIgnoringWinners,
  diffSnapshots,
  expectedAfterKills,
  killedAgainstReference,
  withoutWinners,
} from "./compare.ts"
export type { Consumer } from "./consumers.ts"
export { consumeBin, consumeToEnd, consumeUntilDone, startConsume, timeConsume } from "./consumers.ts"
export type { Snapshot } from "./end-state.ts"
export { endState, list, snapshot } from "./end-state.ts"
export type { GeneratedMix } from "./generate.ts"
export { generateMessages, makeQueueFrom, rng } from "./generate.ts"
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
export { hostileDetails, hostileNames } from "./hostile-names.ts"
export type { KillObservation } from "./kill-observations.ts"
export { killLog, poisonedByKills, summarizeKills } from "./kill-observations.ts"
export type { KillRun } from "./kills.ts"
export { consumeWithRandomKills } from "./kills.ts"
export type { TempMosquitto, TempMqttTopic } from "./mqtt.ts"
export { mqttBroker, tempMosquitto, tempMqttTopic } from "./mqtt.ts"
export type { TempJetStream } from "./nats.ts"
export { tempJetStream } from "./nats.ts"
export { dropPages } from "./page-cache.ts"
export { pgUnavailable, tempDatabase } from "./postgres.ts"
export type { CutChange, CutMode, CutReport, PowerCutMount } from "./power-cut.ts"
export { buildPowerCutFs, mountPowerCut, powerCutUnavailable } from "./power-cut.ts"
export type { CutObservation, CutRun } from "./power-cut-storm.ts"
export { consumeWithPowerCuts, cutAgainstReference, cutLog, killedThenCut, summarizeCuts } from "./power-cut-storm.ts"
export type { RunResult } from "./process.ts"
export { captured, childPids, isStopped, run, spawnConsume, spool } from "./process.ts"
export type { TempAmqpQueue, TestMessage } from "./rabbitmq.ts"
export { closeConnectionNamed, numberedMessages, rabbitUrl, tempAmqpQueue } from "./rabbitmq.ts"
export { receiveAndAck } from "./raw-receive.ts"
export type { TempRedisStream } from "./redis.ts"
export { tempRedisStream } from "./redis.ts"
export { fixturesDir, repoRoot } from "./repo.ts"
export { listening, requireServer } from "./services.ts"
export type { TcpProxy } from "./tcp-proxy.ts"
export { tcpProxy } from "./tcp-proxy.ts"
export type { TempDir, TempQueue } from "./temp.ts"
export { tempDir, tempQueue } from "./temp.ts"
export type { ToolTest } from "./tools.ts"
export { isCi, missingTest, requireTool } from "./tools.ts"
