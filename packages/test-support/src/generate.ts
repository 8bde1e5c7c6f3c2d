// Generated queues for the crash, concurrency and random-kill tests and for `bun run torture`:
// realistic, nasty messages, the same for the same seed.
import fs from "node:fs"
import { join } from "node:path"

/** A small, fast, seedable PRNG (mulberry32): the same seed gives the same queue and kill plan. */
export function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** What a generated queue holds, by kind, so tests can check the outcome adds up. */
export interface GeneratedMix {
  valid: number
  sameDuplicate: number
  reformattedDuplicate: number
  conflict: number
  badJson: number
  missingField: number
  invalidField: number
}

/**
 * Writes `count` message files into `dir`: mostly valid messages, plus redeliveries of an
 * earlier msg_id (byte-identical, reformatted, and with a different payload), JSON that does
 * not parse, messages missing a required field and messages with a wrongly typed field.
 * Names are random, so neither name order nor directory order follows seq.
 */
export function generateMessages(dir: string, count: number, seed: number): GeneratedMix {
  const random = rng(seed)
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T
  const hex = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 16).toString(16)).join("")
  const mix: GeneratedMix = {
    valid: 0,
    sameDuplicate: 0,
    reformattedDuplicate: 0,
    conflict: 0,
    badJson: 0,
    missingField: 0,
    invalidField: 0,
  }
  const sent: { text: string; value: Record<string, unknown> }[] = []
  const seqOf = new Map<string, number>()
  fs.mkdirSync(dir, { recursive: true })
  const names = new Set<string>()
  for (let i = 0; i < count; i++) {
    let name = `m-${hex(10)}.json`
    while (names.has(name)) name = `m-${hex(10)}.json`
    names.add(name)
    const r = random()
    let text: string
    // Half the redeliveries come from a small hot set, so that batches often hold two
    // deliveries of one msg_id and the order in which a batch is processed matters.
    const from = () => (random() < 0.5 ? sent.slice(0, 8) : sent)
    if (sent.length > 0 && r < 0.06) {
      text = (pick(from()) as { text: string }).text
      mix.sameDuplicate++
    } else if (sent.length > 0 && r < 0.09) {
      const v = (pick(from()) as { value: Record<string, unknown> }).value
      text = JSON.stringify(Object.fromEntries(Object.entries(v).reverse()), null, 2)
      mix.reformattedDuplicate++
    } else if (sent.length > 0 && r < 0.12) {
      const v = (pick(from()) as { value: Record<string, unknown> }).value
      text = JSON.stringify({ ...v, amount: Math.round(random() * 1e6) / 100, note: "resent with changes" })
      mix.conflict++
    } else if (r < 0.16) {
      text = pick([`{"msg_id": "x-${hex(6)}", "amount": 1.`, "", "not json", "[1, 2", '{"a":1}}', "\u00ff\u00fe"])
      mix.badJson++
    } else if (r < 0.19) {
      const v: Record<string, unknown> = { msg_id: `x-${hex(8)}`, order_no: "Z-1", seq: 1, amount: 1 }
      delete v[pick(["msg_id", "order_no", "seq", "amount"])]
      text = JSON.stringify(v)
      mix.missingField++
    } else if (r < 0.21) {
      text = JSON.stringify({ msg_id: `x-${hex(8)}`, order_no: "Z-2", seq: pick([0, -1, 1.5, "3"]), amount: 2 })
      mix.invalidField++
    } else {
      const orderNo = `O-${Math.floor(random() * 400)}`
      const seq = (seqOf.get(orderNo) ?? 0) + 1
      seqOf.set(orderNo, seq)
      const cents = Math.floor(random() * 1e7)
      const value = {
        msg_id: `m-${hex(12)}`,
        order_no: orderNo,
        seq,
        amount: `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, "0")}`,
        currency: pick(["EUR", "USD", "JPY"]),
        customer: pick(["Globex", "Initech", 'Acme, "Inc."', "Umbrella\nCorp"]),
      }
      // The amount is written as a bare decimal (e.g. 12.10), exactly as a producer would.
      text = JSON.stringify(value).replace(/"amount":"([\d.]+)"/, '"amount":$1')
      sent.push({ text, value: JSON.parse(text) })
      mix.valid++
    }
    fs.writeFileSync(join(dir, name), text)
  }
  return mix
}

/** Creates a queue root at `root` whose inbox/ holds a copy of every file in `source`, copied in name order. */
export function makeQueueFrom(source: string, root: string): void {
  for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
  // Same order of creation for every copy, so every copy lists its inbox/ in the same order.
  for (const name of fs.readdirSync(source).sort()) fs.copyFileSync(join(source, name), join(root, "inbox", name))
}
