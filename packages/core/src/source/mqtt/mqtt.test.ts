// The MQTT source against the machine's Mosquitto, in what is its own, each test on a topic tree
// and a session of its own: PUBACK only on ack, Receive Maximum bounding what is in flight,
// hand-backs coming again on the session's next connection, replays carrying their header, and a
// lost connection. What every source does is in ../contract.test.ts.
import { afterEach, describe, expect } from "bun:test"
import { requireServer, tcpProxy, tempMqttTopic } from "@spool/test-support"
import { SpoolError } from "../../errors.ts"
import { type Delivery, replayHeader, type SourcePort } from "../port.ts"
import { type MqttSourceOptions, openMqttSource } from "./source.ts"

const it = await requireServer("Mosquitto", "127.0.0.1", 1883, "mosquitto -d -c /etc/mosquitto/mosquitto.conf")

const opened: SourcePort[] = []
async function open(url: string, options?: MqttSourceOptions): Promise<SourcePort> {
  const source = await openMqttSource(url, options)
  opened.push(source)
  return source
}
afterEach(async () => {
  await Promise.all(opened.splice(0).map((source) => source.close()))
})

const text = (deliveries: readonly Delivery[]) => deliveries.map((d) => new TextDecoder().decode(d.body))
const bodies = (count: number, tag = "m") => Array.from({ length: count }, (_, i) => `{"msg_id":"${tag}-${i}"}`)

/** Receives until `count` came or a receive comes back empty. */
async function receiveAll(source: SourcePort, count: number, max: number): Promise<Delivery[]> {
  const seen: Delivery[] = []
  while (seen.length < count) {
    const batch = await source.receive(max, 2000)
    if (batch.length === 0) break
    seen.push(...batch)
  }
  return seen
}

describe("MQTT source", () => {
  it("hands over what was published, PUBACKs only what is acked, and the session keeps the rest", async () => {
    await using t = await tempMqttTopic()
    await t.publish(bodies(4))
    const source = await open(t.url())
    const got = await receiveAll(source, 4, 10)
    expect(text(got).sort()).toEqual(bodies(4).sort())
    expect(got.every((d) => !d.stableId && d.id.startsWith("sha256:") && d.deliveryCount === undefined)).toBe(true)
    expect(got.map((d) => d.origin.address)).toEqual(Array(4).fill(t.topic))
    expect(got[0]?.origin.source).toBe(t.url())
    // The first two committed, the others' effects failed: only the first two are PUBACKed.
    await source.ack(got.slice(0, 2))
    await source.close()
    expect(await t.unacked()).toBe(2)
    expect(t.seen.map((p) => p.payload.toString()).sort()).toEqual(text(got.slice(2)).sort())
    // Sent before without a PUBACK: the broker flags them DUP.
    expect(t.seen.every((p) => p.dup)).toBe(true)
  })

  it("holds no more than the largest batch asked for unacknowledged (Receive Maximum)", async () => {
    await using t = await tempMqttTopic()
    await t.publish(bodies(7))
    const source = await open(t.url())
    const first = await source.receive(3, 2000)
    expect(first).toHaveLength(3)
    // Three unacknowledged: the broker sends nothing more until a PUBACK.
    expect(await source.receive(3, 500)).toEqual([])
    await source.ack(first)
    const rest = await receiveAll(source, 4, 3)
    expect(text([...first, ...rest]).sort()).toEqual(bodies(7).sort())
    await source.ack(rest)
    await source.close()
    expect(await t.unacked()).toBe(0)
  })

  it("sends again on the session's next connection only the delivery released, not those acked before it", async () => {
    await using t = await tempMqttTopic()
    await t.publish(bodies(2))
    const source = await open(t.url())
    const got = await receiveAll(source, 2, 10)
    expect(got).toHaveLength(2)
    // As the engine does: the rest of the batch is acked, then the one handed back released.
    await source.ack(got.slice(1))
    await source.release(got.slice(0, 1))
    const back = await source.receive(10, 2000)
    expect(text(back)).toEqual(text(got.slice(0, 1)))
    expect(back[0]?.redelivered).toBe(true)
    await source.ack(back)
    await source.close()
    expect(await t.unacked()).toBe(0)
  })

  it("publishes a replay at QoS 1 with the spool-replay-of user property, and takes its identity from it", async () => {
    await using t = await tempMqttTopic()
    await t.publish(['{"msg_id":"r"}'], t.topic, { tenant: "eu" })
    const source = await open(t.url())
    const [original] = await source.receive(10, 2000)
    expect(original?.origin.headers).toEqual({ tenant: "eu" })
    await source.ack([original as Delivery])
    const headers = { ...original?.origin.headers, [replayHeader]: "claim-7" }
    await source.publish({ source: t.url(), address: t.topic, headers }, original?.body as Uint8Array)
    const [replayed] = await source.receive(10, 2000)
    expect(replayed?.origin.headers).toEqual(headers)
    expect(replayed?.id).toBe(`${original?.id}~replay-claim-7`)
    expect(replayed?.stableId).toBe(true)
    await source.ack([replayed as Delivery])
    // A topic no subscription takes: the broker would drop the message, so the replay is refused.
    const nowhere = await source.publish({ source: t.url(), address: "spool-test-nobody/x" }, new Uint8Array([1])).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(nowhere).toBeInstanceOf(SpoolError)
    expect((nowhere as SpoolError).message).toContain("no subscription takes messages")
  })

  it("connects again after a lost connection; what was in hand comes again, DUP set, and is acked there", async () => {
    await using t = await tempMqttTopic()
    await t.publish(bodies(3))
    await using proxy = await tcpProxy(1883)
    const source = await open(t.url().replace(":1883/", `:${proxy.port}/`), {
      reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
    })
    const got = await receiveAll(source, 3, 10)
    expect(got).toHaveLength(3)
    proxy.cut(300)
    // The PUBACKs have no connection to go on: skipped, not an error.
    await source.ack(got)
    const again = await receiveAll(source, 3, 10)
    expect(text(again).sort()).toEqual(text(got).sort())
    expect(again.every((d) => d.redelivered)).toBe(true)
    await source.ack(again)
    await source.close()
    expect(proxy.forwarded).toBeGreaterThan(2)
    expect(await t.unacked()).toBe(0)
  })

  it("publishes a replay again when its connection is cut before the PUBACK", async () => {
    await using t = await tempMqttTopic()
    await using proxy = await tcpProxy(1883)
    const source = await open(t.url().replace(":1883/", `:${proxy.port}/`), {
      reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
    })
    const headers = { [replayHeader]: "claim-9" }
    await source.publish({ source: t.url(), address: t.topic, headers }, new TextEncoder().encode("{}"))
    const published = source.publish({ source: t.url(), address: t.topic, headers }, new TextEncoder().encode("[]"))
    // Once the PUBLISH is on the wire, the sockets go before the PUBACK can come back.
    await Bun.sleep(0)
    proxy.cut(300)
    await published
    await source.close()
    expect(await t.unacked()).toBeGreaterThanOrEqual(2)
    expect(t.seen.map((p) => p.payload.toString())).toContain("[]")
  })

  it("fails to open, saying so, when the broker cannot be reached", async () => {
    await using proxy = await tcpProxy(1883)
    proxy.cut(60_000)
    const error = await openMqttSource(`mqtt://127.0.0.1:${proxy.port}/?topic=t&client=c`, {
      reconnect: { initialDelayMs: 20, maxDelayMs: 50, giveUpAfterMs: 300 },
    }).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(SpoolError)
    expect((error as SpoolError).message).toContain("could not be reached")
  })
})
