// A delivery whose landed name another live consumer holds (the same AMQP message-id published
// twice, or a JetStream redelivery, the first delivery still in that consumer's hands) is handed
// back by the second consumer, and comes again until the first has committed it: then it is
// recognised, acknowledged, and nothing is lost or recorded twice. JetStream delays it (a quarter
// lease); RabbitMQ cannot, and requeues it at once.
import { expect } from "bun:test"
import {
  isStopped,
  requireServer,
  snapshot,
  spawnConsume,
  tempAmqpQueue,
  tempJetStream,
  tempQueue,
} from "@spool/test-support"

const rabbit = await requireServer("RabbitMQ", "127.0.0.1", 5672, "rabbitmq-server")
const nats = await requireServer("NATS", "127.0.0.1", 4222, "nats-server -js -a 127.0.0.1 -p 4222")

const consume = (root: string, url: string, more: readonly string[], env: Record<string, string> = {}) =>
  spawnConsume(["--root", root, "--source", url, ...more], env)

rabbit(
  "a name another consumer holds is handed back, then recognised once that consumer committed it",
  async () => {
    await using amqp = await tempAmqpQueue()
    const body = JSON.stringify({ msg_id: "h-1", order_no: "H", seq: 1, amount: 1 })
    await amqp.publish({ body, id: "p-1" }, { body, id: "p-1" })
    await using q = await tempQueue()
    const name = `amqp-${amqp.name}-p-1.json`
    // The first consumer takes one delivery and stops with it landed: its claim holds the name.
    const a = consume(q.root, amqp.url, ["--batch-size", "1"], {
      SPOOL_FAULT: "after-claim",
      SPOOL_FAULT_SIGNAL: "SIGSTOP",
    })
    let b: ReturnType<typeof consume> | undefined
    try {
      for (const deadline = Date.now() + 30_000; !isStopped(a.pid); await Bun.sleep(10))
        if (a.exitCode !== null || Date.now() > deadline) throw new Error("the first consumer never stopped")
      b = consume(q.root, amqp.url, ["--verbose", "--log-format", "json", "--idle-wait", "2s"])
      const stderr = b.stderr
      // The second gets the other delivery of that name and hands it back, again and again.
      const lines: string[] = []
      const reading = (async () => {
        for await (const chunk of stderr.pipeThrough(new TextDecoderStream())) lines.push(chunk)
      })()
      const handedBack = () =>
        lines
          .join("")
          .split("\n")
          .filter((l) => l.includes('"handed-back"')).length
      for (const deadline = Date.now() + 30_000; handedBack() < 2; await Bun.sleep(20))
        if (b.exitCode !== null || Date.now() > deadline) throw new Error(`never handed back:\n${lines.join("")}`)
      expect(lines.join("")).toContain(name)
      expect(snapshot(q.root).processed).toEqual([])
      a.kill("SIGCONT")
      expect(await a.exited).toBe(0)
      expect(await b.exited).toBe(0)
      await reading
      const summary =
        lines
          .join("")
          .split("\n")
          .find((l) => l.includes('"msg":"done"')) ?? ""
      expect(summary).toContain('"redelivered":1')
      expect(summary).toContain('"processed":0')
    } finally {
      a.kill("SIGCONT")
      b?.kill("SIGKILL")
    }
    const s = snapshot(q.root)
    expect((s.processed as { msg_id: string }[]).map((r) => r.msg_id)).toEqual(["h-1"])
    expect(s.duplicates).toEqual([])
    expect(s.claims).toEqual([])
    expect(Object.keys(s.done)).toEqual([name])
    expect(await amqp.ready()).toBe(0)
  },
  60_000,
)

nats(
  "a JetStream redelivery of a name another consumer holds is handed back with a delay, not taken again at once",
  async () => {
    // An ack_wait of 2 s: short enough for a quick redelivery, long enough that a loaded machine
    // handing the redelivery back still does so within it (past it, the server would deliver it
    // once more on its own, which is not what this test is about).
    await using stream = await tempJetStream(2000)
    await stream.publish(JSON.stringify({ msg_id: "j-1", order_no: "J", seq: 1, amount: 1 }))
    await using q = await tempQueue()
    const name = `nats-${stream.name}-1.json`
    // Stopped with the delivery landed, keep-alives and all: ack_wait runs out and the server redelivers.
    const a = consume(q.root, stream.url, [], { SPOOL_FAULT: "after-claim", SPOOL_FAULT_SIGNAL: "SIGSTOP" })
    try {
      for (const deadline = Date.now() + 30_000; !isStopped(a.pid); await Bun.sleep(10))
        if (a.exitCode !== null || Date.now() > deadline) throw new Error("the first consumer never stopped")
      const b = consume(q.root, stream.url, ["--verbose", "--log-format", "json", "--idle-wait", "6s"])
      const [stderr, code] = await Promise.all([new Response(b.stderr).text(), b.exited])
      expect(code, stderr).toBe(0)
      // Handed back once: the delayed nak keeps it from this drain, which then idles out.
      const handedBack = stderr.split("\n").filter((l) => l.includes('"handed-back"'))
      expect(handedBack, stderr).toHaveLength(1)
      expect(handedBack[0], stderr).toContain(name)
      expect(stderr).toContain('"processed":0')
      a.kill("SIGCONT")
      expect(await a.exited).toBe(0)
    } finally {
      a.kill("SIGCONT")
    }
    const s = snapshot(q.root)
    expect((s.processed as { msg_id: string }[]).map((r) => r.msg_id)).toEqual(["j-1"])
    expect(s.duplicates).toEqual([])
    expect(s.claims).toEqual([])
    expect(Object.keys(s.done)).toEqual([name])
    // The first consumer's ack reached the server before it exited; the server applies it on its own time.
    for (const deadline = Date.now() + 5_000; (await stream.unacked()) > 0 && Date.now() < deadline; )
      await Bun.sleep(50)
    expect(await stream.unacked()).toBe(0)
  },
  60_000,
)
