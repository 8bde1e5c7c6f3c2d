// Tests against a server the machine runs (RabbitMQ, NATS, Redis, Mosquitto). A newcomer's
// machine without one runs the rest and says what was left out; CI starts every such server
// (.ci/run), so there an absent one is a broken setup, not a reason to pass.
import { it } from "bun:test"
import net from "node:net"
import { missingTest, type ToolTest } from "./tools.ts"

/** Whether something accepts TCP connections at host:port within `timeoutMs`. */
export function listening(host: string, port: number, timeoutMs = 2000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(timeoutMs, () => done(false))
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
  })
}

/**
 * `it` for tests that talk to the server `name` at host:port; where nothing listens there, each
 * such test is skipped with the reason printed, or fails when CI is set, and `start` says how to
 * run one (`rabbitmq-server -detached`).
 */
export async function requireServer(name: string, host: string, port: number, start: string): Promise<ToolTest> {
  if (await listening(host, port)) return it
  return missingTest(`${name} is not running at ${host}:${port} (start it: ${start})`, "starts every server")
}
