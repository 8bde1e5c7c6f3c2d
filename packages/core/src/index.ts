// @spool/core: the library an application builds its consumer with. spool's own commands
// import @spool/core/engine, and `schema` imports @spool/core/schema.

export { collectGarbageEvery } from "./collect.ts"
export type { ConsumeSummary } from "./consume/summary.ts"
export { SpoolError } from "./errors.ts"
export type { LogFunction, Logger, LoggerLevel } from "./logger.ts"
export { Message } from "./message/type.ts"
export { decodeMessage, messageSchema, validateMessage } from "./message/validate.ts"
export type { Queue } from "./queue/root.ts"
export { createQueue } from "./queue/root.ts"
export type { OpenSourceOptions } from "./source/open.ts"
export { openSource } from "./source/open.ts"
export type { SourcePort } from "./source/port.ts"
export type { DeferPolicy } from "./transient.ts"
export { defaultDeferPolicy, TransientError } from "./transient.ts"
export type {
  ConsumerConfig,
  ConsumerOptions,
  Delivery,
  Exact,
  HandledOutcome,
  Json,
  PostgresConsumer,
  PostgresConsumerConfig,
  SpoolConsumer,
} from "./typed-consumer.ts"
export { createConsumer, createPostgresConsumer, minorUnits } from "./typed-consumer.ts"
