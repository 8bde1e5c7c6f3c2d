import { type } from "arktype"
import { type Message as Fields, messageSchema } from "./validate.ts"

/**
 * spool's message as an arktype Type, for applications that validate a richer message:
 * `Message.and({ currency: "'EUR' | 'USD'" })`. The same node as the validator consume uses
 * by default (`validateMessage`), so it accepts and rejects exactly the same values.
 */
export const Message = type.schema(messageSchema).as<Fields>()
export type Message = Fields
