export * from "./engine.ts"
export { Message } from "./message/type.ts"
export type { Accepted, Decoded, MessageType, Rejected, RejectReason } from "./message/validate.ts"
export {
  canonicalContent,
  canonicalJson,
  decimalValue,
  decodeMessage,
  messageSchema,
  rawNumberField,
  requiredFields,
  validateMessage,
} from "./message/validate.ts"
export type { FieldInfo, FieldRole, JsonType } from "./report/schema.ts"
export { formatSchema, inferSchema } from "./report/schema.ts"
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
