import { describe, expect, test } from "bun:test"
import { SpoolError } from "../../errors.ts"
import { defaultSessionExpirySeconds, parseMqttUrl } from "./url.ts"

describe("parseMqttUrl", () => {
  test.each([
    [
      "mqtt://127.0.0.1:1883/?topic=orders/#&client=spool-1",
      { broker: "mqtt://127.0.0.1:1883", topics: ["orders/#"], clientId: "spool-1" },
      "mqtt://127.0.0.1:1883/?topic=orders/#&client=spool-1",
    ],
    [
      "mqtts://u:p%40ss@h:8883?topic=a/+/b&topic=c%2F%23&client=c%201&sessionExpiry=60&clean=false&qos=1",
      {
        broker: "mqtts://h:8883",
        username: "u",
        password: "p@ss",
        topics: ["a/+/b", "c/#"],
        clientId: "c 1",
        sessionExpirySeconds: 60,
      },
      "mqtts://u@h:8883/?topic=a/+/b&topic=c%2F%23&client=c%201&sessionExpiry=60&clean=false&qos=1",
    ],
    [
      "mqtt://h/?topic=$share/g/orders/%23&client=x",
      { broker: "mqtt://h", topics: ["$share/g/orders/#"], clientId: "x" },
      "mqtt://h/?topic=$share/g/orders/%23&client=x",
    ],
  ])("reads %s", (text, expected, describe) => {
    expect(parseMqttUrl(text)).toEqual({ sessionExpirySeconds: defaultSessionExpirySeconds, ...expected, describe })
  })

  test("takes the wildcards where MQTT allows them: # alone as the last level, + alone as any level", () => {
    for (const filter of ["#", "+", "+/status/#", "a/+/+", "$share/g/#", "/a//b/"])
      expect(parseMqttUrl(`mqtt://h/?topic=${encodeURIComponent(filter)}&client=x`).topics).toEqual([filter])
  })

  test.each([
    [
      "mqtt://user:secret@127.0.0.1:1883/?topic=orders/%23",
      "names no client id: add &client=NAME, the same on every run",
    ],
    ["mqtt://user:secret@h/?client=c", "names no topic: add ?topic=FILTER"],
    ["mqtt://user:secret@h/?topic=&client=c", 'gives the topic "", which is no topic filter: it is empty'],
    ["mqtt://user:secret@h/?topic=a/%23&topic=&client=c", 'gives the topic "", which is no topic filter'],
    [
      "mqtt://user:secret@h/?topic=t1/#/a&client=c",
      '"t1/#/a", which is no topic filter: # stands alone as the last level',
    ],
    ["mqtt://user:secret@h/?topic=t1/a#&client=c", "# stands alone as the last level"],
    ["mqtt://user:secret@h/?topic=t1/a+/b&client=c", "+ stands alone as a level"],
    ["mqtt://user:secret@h/?topic=$share//t&client=c", "names its group"],
    ["mqtt://user:secret@h/?topic=$share/g&client=c", "it is empty"],
    ["mqtt://user:secret@h/?topic=$share/g%2B/t&client=c", "names its group, without + or #"],
    ["mqtt://user:secret@h/?topic=t&client=a&client=b", "gives client more than once"],
    [
      "mqtt://user:secret@h/?topic=t&client=c&clean=true",
      "a clean session forgets what a stopped consumer had not acknowledged",
    ],
    ["mqtt://user:secret@h/?topic=t&client=c&qos=0", "QoS 0 is never acknowledged"],
    ["mqtt://user:secret@h/?topic=t&client=c&qos=2", "spool subscribes at QoS 1"],
    ["mqtt://user:secret@h/?topic=t&client=c&sessionExpiry=0", "the session would end with each connection"],
    ["mqtt://user:secret@h/?topic=t&client=c&sessionExpiry=1h", "write it in whole seconds"],
    ["mqtt://user:secret@h/?topic=t&client=c&keepAlive=5", "does not know (keepAlive)"],
    ["mqtt://user:secret@h/orders?topic=t&client=c", "has a path (/orders)"],
    ["amqp://user:secret@h/?topic=t&client=c", "must start mqtt:// or mqtts://"],
    ["mqtt://user:secret@/?topic=t&client=c", "is not a URL"],
    ["mqtt://user:secret@h/?topic=%zz&client=c", "not valid percent-encoding"],
  ])("refuses %s, saying what to write", (text, says) => {
    let error: unknown
    try {
      parseMqttUrl(text)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(SpoolError)
    expect((error as SpoolError).code).toBe("usage")
    expect((error as SpoolError).message).toContain(says)
    expect((error as SpoolError).message).not.toContain("secret")
  })
})
