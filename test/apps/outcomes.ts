// A consumer that asks for outcomes, used by exact-amounts.test.ts: prints one JSON line per
// message with its verdict, the result onOutcome was given, and ledger.resultOf's answer for
// its msg_id. Run: bun test/apps/outcomes.ts ROOT [URL] (a URL: the PostgreSQL ledger there)
import { createConsumer, createPostgresConsumer, type HandledOutcome, Message, minorUnits } from "@spool/core"

const Payment = Message.and({ currency: "'EUR' | 'USD'" })
const [root, url] = process.argv.slice(2) as [string, string | undefined]
const seen: HandledOutcome[] = []
const options = { root, type: Payment, onOutcome: (o: HandledOutcome) => void seen.push(o) }

let print: (o: HandledOutcome) => Promise<string>
if (url) {
  await using consumer = await createPostgresConsumer({
    ...options,
    ledger: url,
    handle: async (payment) => ({ cents: String(minorUnits(payment.amount)), again: true }),
  })
  await consumer.drain()
  print = async (o) => JSON.stringify({ ...pick(o), resultOf: await consumer.ledger.resultOf(o.msgId) })
  for (const o of seen) process.stdout.write(`${await print(o)}\n`)
} else {
  using consumer = createConsumer({
    ...options,
    handle: (payment) => ({ cents: String(minorUnits(payment.amount)), again: true }),
  })
  await consumer.drain()
  for (const o of seen)
    process.stdout.write(`${JSON.stringify({ ...pick(o), resultOf: consumer.ledger.resultOf(o.msgId) })}\n`)
}

function pick(o: HandledOutcome) {
  return { file: o.file, verdict: o.verdict, result: o.result }
}
