// Property: for any mix of valid, duplicate and invalid files, every input ends in exactly one
// of done/ or error/ with its reason, the processed rows are the distinct valid msg_ids, and
// dup.txt is exactly the distinct msg_ids delivered more than once.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { createConsumer } from "@spool/core"
import { consumeBounded, ledgerRows, queueListing, readErrorCsv, tempQueue } from "@spool/test-support"
import fc from "fast-check"

type Reason = "parse" | "missing-field" | "invalid-field"

interface Valid {
  readonly kind: "valid"
  readonly id: string
  readonly text: string
  readonly amount: string
}
interface Invalid {
  readonly kind: Reason
  readonly text: string
}
type Input = Valid | Invalid

// A small pool makes duplicates common; the free-form ids add quotes, commas and spaces.
const msgId = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom("a", "b", "c", "d", "é", "Z-1", "order 7", "日本", "𝄞", "x,y", 'q"') },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 8 }) },
)
const amountText = fc.oneof(
  fc.tuple(fc.integer({ min: -99999, max: 99999 }), fc.integer({ min: 0, max: 99 })).map(([a, b]) => `${a}.${b}`),
  fc.constantFrom("0.1", "1137.25", "12345678901234567.89", "-0", "1e-3", "5"),
)
const fields = fc.record({
  id: msgId,
  order: fc.constantFrom("o1", "o2", "o,3"),
  seq: fc.integer({ min: 1, max: 1000 }),
  amount: amountText,
  extra: fc.option(fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 })),
  bom: fc.boolean(),
})
type Fields = typeof fields extends fc.Arbitrary<infer F> ? F : never

const messageText = (f: Fields, over: Record<string, string | undefined> = {}) => {
  const parts: Record<string, string | undefined> = {
    msg_id: JSON.stringify(f.id),
    order_no: JSON.stringify(f.order),
    seq: String(f.seq),
    amount: f.amount,
    ...over,
  }
  const body = Object.entries(parts)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${JSON.stringify(k)}:${v}`)
  if (f.extra) body.push(`"extra":${JSON.stringify(f.extra)}`)
  return `${f.bom ? "\uFEFF" : ""}{${body.join(",")}}`
}

const valid: fc.Arbitrary<Input> = fields.map((f) => ({
  kind: "valid",
  id: f.id,
  text: messageText(f),
  amount: f.amount,
}))
const required = ["msg_id", "order_no", "seq", "amount"] as const
const missing: fc.Arbitrary<Input> = fc
  .tuple(fields, fc.constantFrom(...required), fc.boolean())
  .map(([f, k, asNull]) => ({ kind: "missing-field", text: messageText(f, { [k]: asNull ? "null" : undefined }) }))
const wrong = {
  msg_id: ['""', "5", "[]", '"a\\nb"'],
  order_no: ['""', "{}", "false"],
  seq: ["0", "-1", "1.5", '"1"', "9007199254740993", "1e400"],
  amount: ['"1.50"', "true", "1e400", "{}"],
} as const
const invalid: fc.Arbitrary<Input> = fc
  .tuple(fields, fc.constantFrom(...required))
  .chain(([f, k]) =>
    fc.constantFrom(...wrong[k]).map((v) => ({ kind: "invalid-field" as const, text: messageText(f, { [k]: v }) })),
  )
const unparsable: fc.Arbitrary<Input> = fc
  .oneof(
    fc.constantFrom("", "{", "[]", "null", "42", '"s"', '{"msg_id":"a",}'),
    fc.string({ maxLength: 20 }).map((s) => `x${s}`),
    fc.uint8Array({ minLength: 1, maxLength: 16 }).map((b) => `\uFFFE${Buffer.from(b).toString("latin1")}`),
  )
  .map((text) => ({ kind: "parse", text }))

/** A mix of inputs, some valid ones delivered again byte for byte. */
const mix = fc
  .tuple(
    fc.array(fc.oneof({ weight: 4, arbitrary: valid }, missing, invalid, unparsable), { maxLength: 25 }),
    fc.array(fc.nat(), { maxLength: 5 }),
    fc.array(fc.string({ unit: "grapheme-ascii", maxLength: 12 }), { minLength: 40, maxLength: 40 }),
    fc.integer({ min: 1, max: 6 }),
  )
  .map(([inputs, copies, stems, batchSize]) => {
    const all = [...inputs]
    const valids = inputs.filter((i) => i.kind === "valid")
    for (const c of copies) if (valids.length > 0) all.push(valids[c % valids.length] as Input)
    // Unique names with spaces, quotes and commas; never hidden, never a path.
    const files = all.map((input, i) => ({ name: `${i}-${(stems[i % 40] ?? "").replaceAll("/", "_")}.json`, input }))
    return { files, batchSize }
  })

type Mix = typeof mix extends fc.Arbitrary<infer M> ? M : never

/** Ascending as SQLite's BINARY collation sorts text: by UTF-8 bytes. */
const byUtf8 = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b))

function expectInvariants(root: string, { files }: Mix): void {
  const l = queueListing(root)
  expect(l.inbox).toEqual([])
  expect(l.processing).toEqual([])
  const names = files.map((f) => f.name)
  expect([...l.done, ...l.error].sort()).toEqual([...names].sort())
  expect(new Set([...l.done, ...l.error]).size).toBe(names.length)

  const validFiles = files.filter((f) => f.input.kind === "valid")
  expect(l.done).toEqual(validFiles.map((f) => f.name).sort())
  const csv = readErrorCsv(root)
  expect([...csv.keys()].sort()).toEqual(l.error)
  for (const f of files) if (f.input.kind !== "valid") expect(csv.get(f.name)).toBe(f.input.kind)

  const seen = new Map<string, Valid[]>()
  for (const f of validFiles) {
    const v = f.input as Valid
    seen.set(v.id, [...(seen.get(v.id) ?? []), v])
  }
  const { processed } = ledgerRows(root)
  expect([...processed.keys()].sort(byUtf8)).toEqual([...seen.keys()].sort(byUtf8))
  for (const [id, deliveries] of seen)
    expect(deliveries.map((d) => d.amount)).toContain(processed.get(id)?.amount ?? "(no row)")
  const twice = [...seen].filter(([, d]) => d.length > 1).map(([id]) => id)
  const dupTxt = fs.readFileSync(join(root, "dup.txt"), "utf8")
  expect(dupTxt).toBe(
    twice
      .sort(byUtf8)
      .map((id) => `${id}\n`)
      .join(""),
  )
}

async function withQueue(m: Mix, drain: (root: string) => Promise<void>): Promise<void> {
  await using q = await tempQueue()
  for (const f of m.files) q.put(f.name, f.input.text)
  await drain(q.root)
  expectInvariants(q.root, m)
}

describe("any mix of valid, duplicate and invalid files", () => {
  it("ends each in exactly one of done/ or error/, with one row per distinct msg_id and dup.txt the repeated ones", async () => {
    await fc.assert(
      fc.asyncProperty(mix, (m) =>
        withQueue(m, async (root) => {
          using consumer = createConsumer({ root, durable: false, batchSize: m.batchSize })
          await consumer.drain()
        }),
      ),
      { numRuns: 60 },
    )
  }, 60_000)

  it("holds the same way through the real consume process", async () => {
    await fc.assert(
      fc.asyncProperty(mix, (m) =>
        withQueue(m, async (root) => {
          const r = await consumeBounded(root, ["--batch-size", String(m.batchSize), "--no-fsync"])
          expect(r.exitCode).toBe(0)
        }),
      ),
      { numRuns: 3 },
    )
  }, 60_000)
})
