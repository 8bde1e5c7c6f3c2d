// The transport's own floor for the bench: a plain client loop that receives each message of a
// RabbitMQ queue or a JetStream durable consumer and acknowledges it, with nothing in between
// (no ledger, no files), until the broker has had nothing for `idleMs`, as a drain ends.
import { jetstream } from "@nats-io/jetstream"
import { connect as connectNats } from "@nats-io/transport-node"
import { connect as connectAmqp } from "amqplib"

/** Receives and acks until idle; resolves with how many messages it acknowledged. */
export async function receiveAndAck(url: string, idleMs: number, batchSize: number): Promise<number> {
  const u = new URL(url)
  return u.protocol === "nats:" ? natsLoop(u, idleMs, batchSize) : amqpLoop(u, idleMs, batchSize)
}

async function amqpLoop(u: URL, idleMs: number, batchSize: number): Promise<number> {
  const queue = u.searchParams.get("queue")
  if (queue === null) throw new Error(`${u.href}: no ?queue=`)
  u.search = ""
  const connection = await connectAmqp(u.href)
  const channel = await connection.createChannel()
  await channel.prefetch(batchSize)
  let acked = 0
  const idle = Promise.withResolvers<void>()
  let timer = setTimeout(idle.resolve, idleMs)
  await channel.consume(queue, (m) => {
    if (m === null) return
    channel.ack(m)
    acked++
    clearTimeout(timer)
    timer = setTimeout(idle.resolve, idleMs)
  })
  await idle.promise
  await channel.close()
  await connection.close()
  return acked
}

async function natsLoop(u: URL, idleMs: number, batchSize: number): Promise<number> {
  const stream = u.searchParams.get("stream")
  const name = u.searchParams.get("consumer")
  if (stream === null || name === null) throw new Error(`${u.href}: no ?stream= and &consumer=`)
  const nc = await connectNats({ servers: u.host })
  const consumer = await jetstream(nc).consumers.get(stream, name)
  let acked = 0
  for (;;) {
    const batch = await consumer.fetch({ max_messages: batchSize, expires: Math.max(1000, idleMs) })
    let received = 0
    for await (const m of batch) {
      m.ack()
      received++
    }
    acked += received
    if (received === 0) break
  }
  await nc.flush()
  await nc.close()
  return acked
}
