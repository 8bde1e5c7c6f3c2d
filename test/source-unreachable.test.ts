// A --source run started while its broker is out of reach: every transport waits for it the same
// way (source-retry warnings, with backoff, up to a minute) instead of failing at once, so that a
// consumer started beside a broker that is still coming up does not exit and get restarted in a
// loop; and a stop (SIGTERM from systemd, Ctrl-C) ends that wait at once, having taken nothing.
import { expect, test } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { spawnConsume, tempQueue } from "@spool/test-support"

/** A port on 127.0.0.1 nothing listens on (it was free a moment ago): connections to it are refused. */
function closedPort(): number {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const { port } = server
  server.stop(true)
  return port
}

/** Reads `stream` until what it said matches `pattern`, or it ends; returns all it said, and goes on reading. */
async function readUntil(stream: ReadableStream<Uint8Array>, pattern: RegExp) {
  const reader = stream.getReader()
  const decoder = new TextDecoder()
  let said = ""
  let isEnded = false
  while (!pattern.test(said)) {
    const { value, done } = await reader.read()
    if (done) {
      isEnded = true
      break
    }
    said += decoder.decode(value, { stream: true })
  }
  const rest = (async () => {
    while (!isEnded) {
      const { value, done } = await reader.read()
      if (done) break
      said += decoder.decode(value, { stream: true })
    }
    return said
  })()
  return { said, rest }
}

test.each([
  ["RabbitMQ", (port: number) => `amqp://guest:guest@127.0.0.1:${port}/?queue=orders`],
  ["NATS JetStream", (port: number) => `nats://127.0.0.1:${port}/?stream=ORDERS&consumer=spool`],
  ["Redis", (port: number) => `redis://127.0.0.1:${port}/?stream=orders&group=spool`],
  ["MQTT", (port: number) => `mqtt://127.0.0.1:${port}/?topic=orders&client=spool-test`],
])(
  "a run started while %s is out of reach waits for it, and SIGTERM ends the wait at once with exit 0",
  async (_broker, urlOf) => {
    await using q = await tempQueue()
    const url = urlOf(closedPort())
    const started = Date.now()
    const p = spawnConsume(["--root", q.root, "--source", url])
    try {
      const { said, rest } = await readUntil(p.stderr, /source-retry/)
      expect(said).toContain("msg=source-retry")
      expect(said).not.toContain("could not be reached")
      p.kill("SIGTERM")
      const [stderr, code] = await Promise.all([rest, p.exited])
      expect(code, stderr).toBe(0)
      // Long before the minute an unreachable broker is waited for.
      expect(Date.now() - started).toBeLessThan(45_000)
      expect(stderr).not.toContain("could not be reached")
      for (const dir of ["inbox", "processing", "done", "error"]) expect(fs.readdirSync(join(q.root, dir))).toEqual([])
    } finally {
      p.kill("SIGKILL")
    }
  },
  90_000,
)
