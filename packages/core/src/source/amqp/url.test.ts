import { describe, expect, test } from "bun:test"
import { SpoolError } from "../../errors.ts"
import { parseAmqpUrl, vhostOf } from "./url.ts"

describe("parseAmqpUrl", () => {
  test.each([
    [
      "amqp://guest:guest@127.0.0.1:5672/?queue=orders",
      "amqp://guest:guest@127.0.0.1:5672/",
      "orders",
      "amqp://guest@127.0.0.1:5672/?queue=orders",
      "/",
    ],
    [
      "amqp://u:p%40ss@h/prod?queue=a%2Fb&heartbeat=5",
      "amqp://u:p%40ss@h/prod?heartbeat=5",
      "a/b",
      "amqp://u@h/prod?queue=a%2Fb&heartbeat=5",
      "prod",
    ],
    ["amqps://h?queue=q", "amqps://h", "q", "amqps://h?queue=q", "/"],
    ["amqp://h/%2f?queue=q", "amqp://h/%2f", "q", "amqp://h/%2f?queue=q", "/"],
  ])("reads %s", (text, connectUrl, queue, describe, vhost) => {
    const url = parseAmqpUrl(text)
    expect(url).toEqual({ connectUrl, queue, describe })
    expect(vhostOf(url)).toBe(vhost)
  })

  test.each([
    ["amqp://guest:guest@127.0.0.1:5672/", "names no queue: add ?queue=NAME"],
    ["amqp://h/?queue=", "names no queue: add ?queue=NAME"],
    ["amqp://h/?queue=a&queue=b", "names more than one queue"],
    ["amqp://h/?queue=q&prefech=1", "does not know (prefech); it takes queue (required), heartbeat"],
    ["amqp://h/?queue=q&heartbeat=abc", 'heartbeat takes a whole number of seconds, not "abc"'],
    ["amqp://h/?queue=q&frameMax=-1", 'frameMax takes a whole number, not "-1"'],
    ["http://h/?queue=q", "must start amqp:// or amqps://"],
    ["amqp:///?queue=q", "names no host"],
    ["amqp://user:secret@/?queue=q", "is not a URL"],
  ])("refuses %s, saying what to write", (text, says) => {
    let error: unknown
    try {
      parseAmqpUrl(text)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(SpoolError)
    expect((error as SpoolError).code).toBe("usage")
    expect((error as SpoolError).message).toContain(says)
    expect((error as SpoolError).message).not.toContain("secret")
  })
})
