// A RabbitMQ queue's backlog, asked with a passive queue declare: the messages ready in it.
// AMQP tells nothing of the messages delivered and not yet acknowledged; RabbitMQ's management
// API does, and it is a plugin and a port of its own that a source URL does not name.
import { connect } from "amqplib"
import type { Backlog } from "../backlog.ts"
import { closeQuietly } from "./close.ts"
import { parseAmqpUrl } from "./url.ts"

/** The queue's ready messages; unacked is not available over AMQP. */
export async function readAmqpBacklog(text: string, timeoutMs: number): Promise<Backlog> {
  const url = parseAmqpUrl(text)
  const connection = await connect(url.connectUrl, {
    timeout: timeoutMs,
    clientProperties: { connection_name: `spool serve ${url.queue}` },
  })
  // amqplib emits 'error' before 'close' on a failure; without a listener it would throw.
  connection.on("error", () => {})
  try {
    const channel = await connection.createChannel()
    channel.on("error", () => {})
    const { messageCount, consumerCount } = await channel.checkQueue(url.queue)
    return {
      state: "read",
      waiting: messageCount,
      unacked: undefined,
      what: `queue ${url.queue}: ${messageCount} ready, ${consumerCount} consumers`,
      note: "AMQP does not tell how many are delivered and unacknowledged (RabbitMQ's management API does)",
    }
  } finally {
    await closeQuietly(connection)
  }
}
