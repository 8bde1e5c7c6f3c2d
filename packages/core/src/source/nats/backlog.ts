// A JetStream durable consumer's backlog, from its info: num_pending (in the stream, not yet
// delivered to it) and num_ack_pending (delivered, not yet acknowledged).
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import type { Backlog } from "../backlog.ts"
import { parseJetStreamUrl } from "./url.ts"

/** The consumer's pending and ack-pending counts. */
export async function readJetStreamBacklog(text: string, timeoutMs: number): Promise<Backlog> {
  const url = parseJetStreamUrl(text)
  const nc = await connect({
    servers: url.server,
    name: "spool serve",
    ...(url.user !== undefined ? { user: url.user } : {}),
    ...(url.pass !== undefined ? { pass: url.pass } : {}),
    ...(url.token !== undefined ? { token: url.token } : {}),
    timeout: timeoutMs,
    reconnect: false,
  })
  try {
    const jsm = await jetstreamManager(nc, { timeout: timeoutMs })
    const info = await jsm.consumers.info(url.stream, url.consumer)
    return {
      state: "read",
      waiting: info.num_pending,
      unacked: info.num_ack_pending,
      what: `stream ${url.stream}, consumer ${url.consumer}: num_pending ${info.num_pending}, num_ack_pending ${info.num_ack_pending}`,
    }
  } finally {
    await nc.close()
  }
}
