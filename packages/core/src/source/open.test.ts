import { expect, it } from "bun:test"
import { SpoolError } from "../errors.ts"
import { openSource } from "./open.ts"

it("refuses a scheme it has no adapter for, as a usage error that shows what to write", async () => {
  for (const url of ["kafka://broker:9092/orders", "http://u:secret@host/", "orders"]) {
    const error = await openSource(url).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(SpoolError)
    expect((error as SpoolError).code).toBe("usage")
    expect((error as SpoolError).message).toContain("amqp://")
    expect((error as SpoolError).message).toContain("nats://")
    expect((error as SpoolError).message).toContain("redis://")
    expect((error as SpoolError).message).not.toContain("secret")
  }
})

it("picks the adapter by scheme: each one's own URL rules answer", async () => {
  // A URL without its required parameter reaches the adapter's reader, which names it.
  await expect(openSource("amqp://127.0.0.1:5672/")).rejects.toThrow(/queue/)
  await expect(openSource("AMQPS://127.0.0.1/")).rejects.toThrow(/queue/)
  await expect(openSource("nats://127.0.0.1:4222/")).rejects.toThrow(/stream/)
  await expect(openSource("mqtt://127.0.0.1:1883/?client=c")).rejects.toThrow(/topic/)
  await expect(openSource("MQTTS://h/?topic=t")).rejects.toThrow(/client id/)
  await expect(openSource("redis://127.0.0.1:6379/?group=g")).rejects.toThrow(/has no stream/)
  await expect(openSource("REDISS://127.0.0.1/?stream=s")).rejects.toThrow(/has no group/)
})
