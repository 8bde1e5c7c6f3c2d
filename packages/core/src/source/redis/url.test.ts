import { describe, expect, test } from "bun:test"
import { SpoolError } from "../../errors.ts"
import { parseRedisUrl } from "./url.ts"

describe("parseRedisUrl", () => {
  test.each([
    [
      "redis://127.0.0.1:6379/?stream=orders&group=spool",
      { host: "127.0.0.1", port: 6379, db: 0, isTls: false, stream: "orders", group: "spool", leaseMs: 30_000 },
      "redis://127.0.0.1:6379/?stream=orders&group=spool",
    ],
    [
      "rediss://app:s%40cret@cache.example:6380/2?stream=a%2Fb&group=g&consumer=c-1&lease=5s",
      {
        host: "cache.example",
        port: 6380,
        db: 2,
        username: "app",
        password: "s@cret",
        isTls: true,
        stream: "a/b",
        group: "g",
        consumer: "c-1",
        leaseMs: 5000,
      },
      "rediss://app@cache.example:6380/2?stream=a%2Fb&group=g",
    ],
    [
      "redis://:secret@h?stream=s&group=g&lease=250",
      { host: "h", port: 6379, db: 0, password: "secret", isTls: false, stream: "s", group: "g", leaseMs: 250 },
      "redis://h/?stream=s&group=g",
    ],
    [
      "redis://[::1]:7000/0?stream=s&group=g&lease=2m",
      { host: "::1", port: 7000, db: 0, isTls: false, stream: "s", group: "g", leaseMs: 120_000 },
      "redis://[::1]:7000/?stream=s&group=g",
    ],
  ])("reads %s", (text, fields, describe) => {
    expect(parseRedisUrl(text)).toEqual({ ...fields, describe })
  })

  test.each([
    ["redis://127.0.0.1:6379/?group=spool", "has no stream: add the stream key to read"],
    ["redis://h/?stream=s", "has no group: add the consumer group"],
    ["redis://h/?stream=&group=g", "has an empty stream"],
    ["redis://h/?stream=a&stream=b&group=g", "names stream 2 times"],
    ["redis://h/?stream=s&group=g&lease=1h", "lease=1h is not a duration of 100ms or more"],
    ["redis://h/?stream=s&group=g&lease=50ms", "lease=50ms is not a duration of 100ms or more"],
    ["redis://h/?stream=s&group=g&consumr=x", "does not know (consumr); it takes stream and group (required)"],
    ["redis://u:secret@h/orders?stream=s&group=g", 'the path is the database number (/0, /1, ...), not "orders"'],
    ["http://u:secret@h/?stream=s&group=g", "must start redis:// or rediss://"],
    ["redis://u:secret@/?stream=s&group=g", "is not a URL"],
  ])("refuses %s, saying what to write", (text, says) => {
    let error: unknown
    try {
      parseRedisUrl(text)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(SpoolError)
    expect((error as SpoolError).code).toBe("usage")
    expect((error as SpoolError).message).toContain(says)
    expect((error as SpoolError).message).not.toContain("secret")
  })
})
