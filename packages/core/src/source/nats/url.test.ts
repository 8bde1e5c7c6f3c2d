import { describe, expect, it } from "bun:test"
import { SpoolError } from "../../errors.ts"
import { parseJetStreamUrl } from "./url.ts"

describe("parseJetStreamUrl", () => {
  it.each([
    [
      "nats://127.0.0.1:4222/?stream=ORDERS&consumer=spool",
      { server: "127.0.0.1:4222", stream: "ORDERS", consumer: "spool" },
      "nats://127.0.0.1:4222/?stream=ORDERS&consumer=spool",
    ],
    [
      "nats://broker?consumer=c&stream=S",
      { server: "broker:4222", stream: "S", consumer: "c" },
      "nats://broker:4222/?stream=S&consumer=c",
    ],
    [
      "nats://app:s%40cret@10.0.0.5:4333/?stream=S&consumer=c",
      { server: "10.0.0.5:4333", user: "app", pass: "s@cret" },
      "nats://app@10.0.0.5:4333/?stream=S&consumer=c",
    ],
    ["nats://T0KEN@host:4222/?stream=S&consumer=c", { token: "T0KEN" }, "nats://host:4222/?stream=S&consumer=c"],
  ])("reads %s", (text, expected, describe) => {
    const url = parseJetStreamUrl(text)
    expect(url).toMatchObject(expected)
    expect(url.describe).toBe(describe)
    expect(url.describe).not.toContain("cret")
    expect(url.describe).not.toContain("T0KEN")
  })

  it.each([
    ["orders", "is not a URL"],
    ["amqp://127.0.0.1/?stream=S&consumer=c", "starts with nats://"],
    ["nats://127.0.0.1:4222/ORDERS?consumer=c", "has a path"],
    ["nats://127.0.0.1:4222/?consumer=c", "has no stream: add the JetStream stream to read, e.g. ?stream=ORDERS"],
    ["nats://127.0.0.1:4222/?stream=S", "has no consumer: add the durable pull consumer"],
    ["nats://127.0.0.1:4222/?stream=&consumer=c", "has no stream"],
    ["nats://127.0.0.1:4222/?stream=S&stream=T&consumer=c", "names stream 2 times"],
    ["nats://127.0.0.1:4222/?stream=S&consumer=c&queue=q", 'unknown parameter "queue"'],
    ["nats://127.0.0.1:4222/?stream=OR.DERS&consumer=c", 'stream "OR.DERS" is not a JetStream name'],
    ["nats://127.0.0.1:4222/?stream=S&consumer=a*", 'consumer "a*" is not a JetStream name'],
  ])("refuses %s, saying what to write", (text, message) => {
    let thrown: unknown
    try {
      parseJetStreamUrl(text)
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(SpoolError)
    expect((thrown as SpoolError).code).toBe("usage")
    expect((thrown as SpoolError).message).toContain(message)
  })
})
