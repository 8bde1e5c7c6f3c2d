// The AMQP source against the machine's RabbitMQ, in what is its own: prefetch, message-ids and
// headers, quorum counts, refusals. What every source does is in ../contract.test.ts. Each test
// declares a queue of its own and deletes it afterwards.
import { afterEach, describe, expect } from "bun:test"
import { createHash, randomUUID } from "node:crypto"
import { join } from "node:path"
import {
  rabbitUrl as broker,
  numberedMessages as numbered,
  requireServer,
  tempAmqpQueue as tempQueue,
} from "@spool/test-support"
import { SpoolError } from "../../errors.ts"
import type { Log } from "../../log.ts"
import type { Delivery, SourcePort } from "../port.ts"
import { type AmqpSourceOptions, openAmqpSource } from "./source.ts"

const it = await requireServer("RabbitMQ", "127.0.0.1", 5672, "rabbitmq-server -detached")

const ids = (deliveries: readonly Delivery[]) => deliveries.map((d) => d.id)

/** A log that keeps each event's name. */
function eventLog(): Log & { readonly events: string[] } {
  const events: string[] = []
  const keep = (event: string) => void events.push(event)
  return { events, warn: keep, notice: keep, info: keep, debug: keep }
}

/** Reads until `done` holds or 10 s pass, and returns the last value read. */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 10_000
  for (;;) {
    const value = await read()
    if (done(value) || Date.now() > deadline) return value
    await Bun.sleep(20)
  }
}

/** Receives batches of at most `max` until `count` deliveries came; throws when one comes back empty first. */
async function collect(source: SourcePort, count: number, max = count): Promise<Delivery[]> {
  const seen: Delivery[] = []
  while (seen.length < count) {
    const batch = await source.receive(max, 5000)
    if (batch.length === 0) throw new Error(`only ${seen.length} of ${count} deliveries came`)
    expect(batch.length).toBeLessThanOrEqual(max)
    seen.push(...batch)
  }
  return seen
}

const opened: SourcePort[] = []
async function open(url: string, options?: AmqpSourceOptions): Promise<SourcePort> {
  const source = await openAmqpSource(url, options)
  opened.push(source)
  return source
}
afterEach(async () => {
  await Promise.all(opened.splice(0).map((source) => source.close()))
})

describe.each(["classic", "quorum"] as const)("a %s queue", (type) => {
  it("holds one batch at most: the broker keeps the rest ready until those are acked", async () => {
    await using q = await tempQueue(type)
    await q.publish(...numbered(10))
    const source = await open(q.url)
    const first = await collect(source, 3)
    expect(ids(first)).toEqual(["m-00", "m-01", "m-02"])
    // Three unacked are the consumer's whole prefetch: nothing more reaches this process.
    expect(await source.receive(3, 300)).toEqual([])
    expect(await q.ready()).toBe(7)
    await source.ack(first)
    const second = await collect(source, 3)
    expect(ids(second)).toEqual(["m-03", "m-04", "m-05"])
    await source.close()
    // The acked three are gone; the three in hand at the close are back in the queue.
    expect(
      await until(
        () => q.ready(),
        (n) => n === 7,
      ),
    ).toBe(7)
  })
})

it("counts a quorum queue's deliveries from its headers, and none on a classic queue", async () => {
  await using quorum = await tempQueue("quorum")
  await using classic = await tempQueue("classic")
  for (const q of [quorum, classic]) await q.publish({ body: "x", id: "m-1" })
  const counts = async (url: string) => {
    const source = await open(url)
    const seen: [number | undefined, boolean][] = []
    for (let i = 0; i < 3; i++) {
      const [delivery] = await source.receive(1, 5000)
      if (delivery === undefined) throw new Error("the message did not come back")
      seen.push([delivery.deliveryCount, delivery.redelivered])
      await (i < 2 ? source.release([delivery]) : source.ack([delivery]))
    }
    return seen
  }
  // The first delivery carries no count header, so it reads as unknown, not as 1.
  expect(await counts(quorum.url)).toEqual([
    [undefined, false],
    [2, true],
    [3, true],
  ])
  expect(await counts(classic.url)).toEqual([
    [undefined, false],
    [undefined, true],
    [undefined, true],
  ])
})

it("hands a released delivery back with its id; without a message-id the id is the body's sha256", async () => {
  await using q = await tempQueue()
  await q.publish({ body: "no id here" }, { body: "with id", id: "m-1" })
  const log = eventLog()
  const source = await open(q.url, { log })
  const batch = await collect(source, 2)
  const hash = `sha256:${createHash("sha256").update("no id here").digest("hex")}`
  expect(batch.map((d) => [d.id, d.stableId, d.redelivered])).toEqual([
    [hash, false, false],
    ["m-1", true, false],
  ])
  await source.release(batch)
  // Released twice: the second is skipped, since a tag settled twice closes the channel.
  await source.release(batch)
  const again = await collect(source, 2)
  expect(again.map((d) => [d.id, d.stableId, d.redelivered])).toEqual([
    [hash, false, true],
    ["m-1", true, true],
  ])
  await source.ack(again)
  await source.close()
  expect(await q.ready()).toBe(0)
  expect(log.events).toEqual(["source-connected"])
})

it("bounds what it holds by the prefetch option, and subscribes again for a larger batch", async () => {
  await using q = await tempQueue()
  await q.publish(...numbered(12))
  const fixed = await open(q.url, { prefetch: 2 })
  const two = await collect(fixed, 2, 5)
  expect(ids(two)).toEqual(["m-00", "m-01"])
  expect(await fixed.receive(5, 300)).toEqual([])
  await fixed.ack(two)
  await fixed.close()
  const growing = await open(q.url)
  const small = await collect(growing, 2)
  expect(ids(small)).toEqual(["m-02", "m-03"])
  await growing.ack(small)
  const large = await collect(growing, 8)
  expect(ids(large)).toEqual(["m-04", "m-05", "m-06", "m-07", "m-08", "m-09", "m-10", "m-11"])
  await growing.ack(large)
  await growing.close()
  expect(await q.ready()).toBe(0)
})

it("publishes with a confirm, keeping the message-id and the text headers", async () => {
  await using q = await tempQueue()
  await q.publish({ body: '{"msg_id":"p-1"}', id: "p-1", headers: { trace: "t-1", retries: 3 } })
  const source = await open(q.url)
  const [delivery] = await source.receive(1, 5000)
  if (delivery === undefined) throw new Error("nothing was delivered")
  expect(delivery.origin).toEqual({
    source: `amqp://guest@127.0.0.1:5672/?queue=${q.name}`,
    address: q.name,
    headers: { trace: "t-1" },
    messageId: "p-1",
  })
  await source.ack([delivery])
  await source.publish(delivery.origin, delivery.body)
  const [replayed] = await source.receive(1, 5000)
  expect(replayed?.id).toBe("p-1")
  expect(replayed?.stableId).toBe(true)
  expect(replayed?.redelivered).toBe(false)
  expect(replayed?.origin).toEqual(delivery.origin)
  expect(new TextDecoder().decode(replayed?.body)).toBe('{"msg_id":"p-1"}')
  await source.ack(replayed ? [replayed] : [])
})

it("refuses to publish to a queue that does not exist, and publishes again afterwards", async () => {
  await using q = await tempQueue()
  const source = await open(q.url)
  const missing = `spool-test-missing-${randomUUID()}`
  const refused = await source
    .publish({ source: source.describe, address: missing }, new TextEncoder().encode("x"))
    .then(
      () => undefined,
      (error: unknown) => error,
    )
  expect(refused).toBeInstanceOf(SpoolError)
  expect((refused as SpoolError).code).toBe("not-a-queue")
  expect((refused as SpoolError).message).toContain(`no queue named "${missing}"`)
  await source.publish({ source: source.describe, address: q.name }, new TextEncoder().encode("y"))
  expect(await q.ready()).toBe(1)
})

it("leaves the deliveries of a process killed with them in hand to be delivered again", async () => {
  await using q = await tempQueue()
  await q.publish(...numbered(6))
  const child = Bun.spawn(
    [
      "bun",
      "-e",
      `import { openAmqpSource } from ${JSON.stringify(join(import.meta.dir, "source.ts"))}
       const source = await openAmqpSource(${JSON.stringify(q.url)})
       const held = []
       while (held.length < 3) held.push(...(await source.receive(3, 5000)))
       console.log(JSON.stringify(held.map((d) => d.id)))
       setInterval(() => {}, 1000)`,
    ],
    { stdout: "pipe", stderr: "inherit" },
  )
  let line = ""
  try {
    const reader = child.stdout.getReader()
    while (!line.includes("\n")) {
      const { value, done } = await reader.read()
      if (done) throw new Error(`the child exited before receiving (code ${await child.exited})`)
      line += new TextDecoder().decode(value)
    }
    expect(JSON.parse(line)).toEqual(["m-00", "m-01", "m-02"])
    expect(await q.ready()).toBe(3)
  } finally {
    child.kill("SIGKILL")
    await child.exited
  }
  // The broker sees the socket close and puts the three back.
  expect(
    await until(
      () => q.ready(),
      (n) => n === 6,
    ),
  ).toBe(6)
  const source = await open(q.url)
  const all = await collect(source, 6)
  expect(ids(all)).toEqual(["m-00", "m-01", "m-02", "m-03", "m-04", "m-05"])
  expect(all.filter((d) => d.redelivered).map((d) => d.id)).toEqual(["m-00", "m-01", "m-02"])
  await source.ack(all)
}, 30_000)

it("says what to do when the queue, the login or the vhost is wrong", async () => {
  const refusal = (url: string) =>
    openAmqpSource(url).then(
      () => undefined,
      (error: unknown) => error as SpoolError,
    )
  const missing = await refusal(`${broker}?queue=spool-test-missing-${randomUUID()}`)
  expect(missing?.code).toBe("not-a-queue")
  expect(missing?.message).toContain("declare it")
  const login = await refusal("amqp://guest:wrong@127.0.0.1:5672/?queue=q")
  expect(login?.code).toBe("usage")
  expect(login?.message).toContain("check the user and password")
  expect(login?.message).not.toContain("wrong")
  const vhost = await refusal(`amqp://guest:guest@127.0.0.1:5672/no-such-vhost-${randomUUID()}?queue=q`)
  expect(vhost?.code).toBe("usage")
  expect(vhost?.message).toContain("would not open vhost")
})

it("refuses a delivery it did not hand over, instead of acking something else", async () => {
  await using q = await tempQueue()
  const source = await open(q.url)
  const stranger: Delivery = {
    id: "m-x",
    stableId: true,
    body: new Uint8Array(),
    deliveryCount: undefined,
    redelivered: false,
    origin: { source: source.describe, address: q.name },
  }
  await expect(source.ack([stranger])).rejects.toThrow("was not received from this source")
})
