export * from "./engine.ts"
export type { Accepted, Decoded, MessageType, Rejected, RejectReason } from "./message.ts"
export {
  canonicalContent,
  canonicalJson,
  decimalValue,
  decodeMessage,
  messageSchema,
  rawNumberField,
  requiredFields,
  validateMessage,
} from "./message.ts"
export { Message } from "./message-type.ts"
export type { FieldInfo, FieldRole, JsonType } from "./schema.ts"
export { formatSchema, inferSchema } from "./schema.ts"
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
