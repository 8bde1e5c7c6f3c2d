// Test support for RabbitMQ sources: a queue of the test's own on the machine's broker, and a
// way to close a client's connection from the broker's side.
import { randomUUID } from "node:crypto"
import { connect } from "amqplib"

/** The machine's broker, as tests reach it (guest/guest, default vhost). */
export const rabbitUrl = "amqp://guest:guest@127.0.0.1:5672/"

/** One message for TempAmqpQueue.publish. */
export interface TestMessage {
  readonly body: string
  /** The AMQP message-id property; absent when undefined. */
  readonly id?: string
  readonly headers?: Record<string, unknown>
}

/** A durable queue declared for one test and deleted, with whatever it holds, when disposed. */
export interface TempAmqpQueue extends AsyncDisposable {
  readonly name: string
  /** The source URL of the queue on the machine's broker. */
  readonly url: string
  /** Publishes persistent messages and resolves once the broker confirmed them all. */
  publish(...messages: TestMessage[]): Promise<void>
  /** Messages ready in the queue: neither in a consumer's hands nor acked. */
  ready(): Promise<number>
}

export async function tempAmqpQueue(type: "classic" | "quorum" = "classic"): Promise<TempAmqpQueue> {
  const connection = await connect(rabbitUrl)
  const channel = await connection.createConfirmChannel()
  const name = `spool-test-${type}-${randomUUID()}`
  await channel.assertQueue(name, { durable: true, arguments: { "x-queue-type": type } })
  return {
    name,
    url: `${rabbitUrl}?queue=${encodeURIComponent(name)}`,
    async publish(...messages) {
      for (const m of messages)
        channel.sendToQueue(name, Buffer.from(m.body), {
          persistent: true,
          ...(m.id === undefined ? {} : { messageId: m.id }),
          ...(m.headers === undefined ? {} : { headers: m.headers }),
        })
      await channel.waitForConfirms()
    },
    async ready() {
      return (await channel.checkQueue(name)).messageCount
    },
    async [Symbol.asyncDispose]() {
      await channel.deleteQueue(name)
      await connection.close()
    },
  }
}

/** `count` messages `{"msg_id":"m-00"}`, ... with the same message-ids, in order. */
export function numberedMessages(count: number): (TestMessage & { readonly id: string })[] {
  return Array.from({ length: count }, (_, i) => {
    const id = `m-${String(i).padStart(2, "0")}`
    return { body: `{"msg_id":"${id}"}`, id }
  })
}

/**
 * Closes, from the broker's side (`rabbitmqctl close_connection`), the client connection whose
 * `connection_name` client property is `name`; waits for it to be listed first. rabbitmqctl
 * needs the broker's Erlang cookie, i.e. the user the broker runs as, or root.
 */
export async function closeConnectionNamed(name: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const listed = await ctl(["-q", "--no-table-headers", "list_connections", "pid", "client_properties"])
    const line = listed.split("\n").find((l) => l.includes(`{"connection_name","${name}"}`))
    const pid = line?.split("\t")[0]
    if (pid !== undefined) {
      await ctl(["close_connection", pid, "closed by a test"])
      return
    }
    if (Date.now() > deadline) throw new Error(`rabbitmqctl lists no connection named ${name}:\n${listed}`)
  }
}

async function ctl(args: string[]): Promise<string> {
  const proc = Bun.spawn(["rabbitmqctl", ...args], { stdout: "pipe", stderr: "pipe" })
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ])
  if (code !== 0) throw new Error(`rabbitmqctl ${args.join(" ")} exited ${code}: ${stderr}`)
  return stdout
}
