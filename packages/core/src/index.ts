export * from "./engine.ts"
export type { Accepted, Decoded, MessageType, Rejected, RejectReason } from "./message.ts"
export {
  canonicalJson,
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
  PostgresConsumer,
  PostgresConsumerConfig,
  SpoolConsumer,
} from "./typed-consumer.ts"
export { createConsumer, createPostgresConsumer } from "./typed-consumer.ts"
