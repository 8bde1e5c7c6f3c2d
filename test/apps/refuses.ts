// A library application that refuses every message with the detail the message carries: its
// handler throws an Error of that text (error/, reason handler), or with "later": true a
// TransientError of it (deferred/ for an hour). Used by serve-hostile.test.ts to put hostile
// details in the ledger, and by mqtt-session.test.ts, given a SOURCE, to fail an effect of a
// broker delivery. Prints the drain's summary. Run: bun test/apps/refuses.ts ROOT [SOURCE]
import { createConsumer, Message, TransientError } from "@spool/core"

const Refused = Message.and({ detail: "string", "later?": "boolean" })
const root = process.argv[2] as string
const source = process.argv[3]

using consumer = createConsumer({
  root,
  type: Refused,
  defer: { firstMs: 3_600_000 },
  ...(source !== undefined ? { source, idleWaitMs: 1000 } : {}),
  handle(m) {
    if (m.later === true) throw new TransientError(m.detail)
    throw new Error(m.detail)
  },
})
process.stdout.write(`${JSON.stringify(await consumer.drain())}\n`)
