// Test support for JetStream sources: a stream of the test's own on the machine's NATS server,
// its durable consumer created by the test (with a short ack_wait, so that a killed consumer's
// deliveries come back within a test), and what the consumer still holds.
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect, nanos } from "@nats-io/transport-node"

/** A stream deleted, with its consumers and messages, when disposed. */
export interface TempJetStream extends AsyncDisposable {
  readonly name: string
  readonly subject: string
  /** The source URL of its durable consumer `spool`. */
  readonly url: string
  /** Publishes each body and resolves once the stream stored them all. */
  publish(...bodies: (string | Uint8Array)[]): Promise<void>
  /** Messages the consumer has not had acknowledged: pending delivery or delivered and unacked. */
  unacked(): Promise<number>
  /** The durable consumer's counts: delivered and not yet acknowledged, and redelivered by the server. */
  counts(): Promise<{ ackPending: number; redelivered: number }>
  /**
   * Pulls from the durable consumer as another consumer would, for up to `expiresMs`, and naks
   * what comes: the sequence and delivery count of each message the server handed out meanwhile.
   */
  pullAsAnother(max: number, expiresMs: number): Promise<{ seq: number; deliveryCount: number }[]>
  /** Pulls `max` messages from the durable consumer as another consumer would and never acks them: they stay ack pending until ack_wait. */
  holdUnacked(max: number): Promise<number>
}

export async function tempJetStream(ackWaitMs = 1000): Promise<TempJetStream> {
  const nc = await connect({ servers: "127.0.0.1:4222" })
  const jsm = await jetstreamManager(nc)
  const js = jetstream(nc)
  const name = `SPOOL_E2E_${crypto.randomUUID().slice(0, 8).toUpperCase()}`
  const subject = `${name.toLowerCase()}.orders`
  await jsm.streams.add({ name, subjects: [`${name.toLowerCase()}.>`] })
  await jsm.consumers.add(name, { durable_name: "spool", ack_policy: AckPolicy.Explicit, ack_wait: nanos(ackWaitMs) })
  return {
    name,
    subject,
    url: `nats://127.0.0.1:4222/?stream=${name}&consumer=spool`,
    async publish(...bodies) {
      for (const b of bodies) await js.publish(subject, typeof b === "string" ? new TextEncoder().encode(b) : b)
    },
    async unacked() {
      const info = await jsm.consumers.info(name, "spool")
      return info.num_pending + info.num_ack_pending
    },
    async counts() {
      const info = await jsm.consumers.info(name, "spool")
      return { ackPending: info.num_ack_pending, redelivered: info.num_redelivered }
    },
    async pullAsAnother(max, expiresMs) {
      const consumer = await js.consumers.get(name, "spool")
      const got: { seq: number; deliveryCount: number }[] = []
      for await (const m of await consumer.fetch({ max_messages: max, expires: expiresMs })) {
        got.push({ seq: m.info.streamSequence, deliveryCount: m.info.deliveryCount })
        m.nak()
      }
      return got
    },
    async holdUnacked(max) {
      const consumer = await js.consumers.get(name, "spool")
      let held = 0
      for await (const _m of await consumer.fetch({ max_messages: max, expires: 5000 })) if (++held === max) break
      return held
    },
    async [Symbol.asyncDispose]() {
      await jsm.streams.delete(name).catch(() => {})
      await nc.close()
    },
  }
}
