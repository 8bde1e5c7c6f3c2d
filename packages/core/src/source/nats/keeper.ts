// The JetStream keeper (see KeeperSpec in ../port.ts): run in a worker thread with a connection of
// its own, it restarts the ack_wait of the deliveries in hand by publishing `+WPI` (what the
// client's working() sends) to each delivery's reply subject. The server takes an
// acknowledgement from any connection, so the keeper needs nothing of the receiving one.
import { connect, type NatsConnection } from "@nats-io/transport-node"
import type { Keeper } from "../port.ts"
import { connectionOptions, type NatsServer } from "./connect.ts"

/** How the keeper connects: the source's server and credentials. */
export interface JetStreamKeeperOptions extends NatsServer {
  readonly name: string
  readonly timeoutMs: number
}

/** Opens the keeper's own connection. */
export async function openKeeper(options: unknown): Promise<Keeper> {
  const o = options as JetStreamKeeperOptions
  const nc: NatsConnection = await connect(connectionOptions(o, `${o.name} keeper`, o.timeoutMs))
  return {
    async keep(tokens) {
      for (const reply of tokens) nc.publish(reply, "+WPI")
      // A PING answered after the publishes: the server has read them.
      await nc.flush()
    },
    async close() {
      await nc.close()
    },
  }
}
