import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { createQueue, type Queue } from "../queue/root.ts"
import { formatSchema, inferSchema } from "./schema.ts"

const base = { msg_id: "m", order_no: "o", seq: 1, amount: 1 }

interface TempQueue extends AsyncDisposable {
  readonly q: Queue
  put(dir: "inbox" | "processing" | "done" | "error", name: string, content: string | object): void
}

async function tempQueue(): Promise<TempQueue> {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-schema-"))
  const q = createQueue(join(dir, "q"))
  return {
    q,
    put: (d, name, content) =>
      fs.writeFileSync(join(q[d], name), typeof content === "string" ? content : JSON.stringify(content)),
    [Symbol.asyncDispose]: async () => fs.rmSync(dir, { recursive: true, force: true }),
  }
}

/** The field -> type map inferred from messages that differ only in `extra`. */
async function typesOf(values: readonly unknown[]): Promise<string | undefined> {
  await using t = await tempQueue()
  values.forEach((v, i) => {
    t.put("inbox", `${i}.json`, { ...base, msg_id: `m${i}`, extra: v })
  })
  return inferSchema(t.q).fields.find((f) => f.field === "extra")?.type
}

describe("inferSchema", () => {
  it.each([
    ["integers stay integer", [1, 2], "integer"],
    ["an integer and a fraction widen to number", [1, 2.5], "number"],
    ["fractions are number", [0.5], "number"],
    ["strings", ["a"], "string"],
    ["booleans", [true, false], "boolean"],
    ["objects", [{ a: 1 }], "object"],
    ["arrays", [[1, 2]], "array"],
    ["null next to a string is dropped", [null, "a"], "string"],
    ["null alone is listed", [null], "null"],
    ["a string and an integer are both listed, sorted", ["a", 1], "integer|string"],
    ["a string, an integer and a fraction", ["a", 1, 1.5], "number|string"],
    ["an array and an object", [[], {}], "array|object"],
  ] as const)("%s", async (_, values, expected) => {
    expect(await typesOf(values)).toBe(expected)
  })

  it("gives the required fields their roles, first and in order, then the rest by name", async () => {
    await using t = await tempQueue()
    t.put("inbox", "a.json", { zeta: 1, amount: 2.5, seq: 1, alpha: "x", order_no: "o", msg_id: "m" })
    const { fields, sampled } = inferSchema(t.q)
    expect(sampled).toBe(1)
    expect(fields.map((f) => [f.field, f.type, f.role])).toEqual([
      ["msg_id", "string", "idempotency-key"],
      ["order_no", "string", "ordering-key"],
      ["seq", "integer", "sequence"],
      ["amount", "number", "amount"],
      ["alpha", "string", "attribute"],
      ["zeta", "integer", "attribute"],
    ])
  })

  it("gives fields named like an object's own members the attribute role", async () => {
    await using t = await tempQueue()
    t.put(
      "inbox",
      "a.json",
      '{"msg_id":"m","order_no":"o","seq":1,"amount":1,"__proto__":{},"constructor":1,"toString":"x"}',
    )
    const { fields } = inferSchema(t.q)
    expect(fields.slice(4).map((f) => [f.field, f.type, f.role])).toEqual([
      ["__proto__", "object", "attribute"],
      ["constructor", "integer", "attribute"],
      ["toString", "string", "attribute"],
    ])
  })

  it("ignores bad messages, error/, non-.json names and directories", async () => {
    await using t = await tempQueue()
    t.put("inbox", "good.json", base)
    t.put("inbox", "broken.json", '{"msg_id": "x", "only_in_broken": 1')
    t.put("inbox", "missing.json", { msg_id: "x", seq: 1, amount: 1, only_in_missing: 1 })
    t.put("inbox", "invalid.json", { ...base, seq: "1", only_in_invalid: 1 })
    t.put("inbox", "note.txt", { ...base, only_in_txt: 1 })
    t.put("inbox", "msg.json.tmp", { ...base, only_in_tmp: 1 })
    t.put("error", "e.json", { ...base, only_in_error: 1 })
    fs.mkdirSync(join(t.q.inbox, "dir.json"))
    const { fields, sampled } = inferSchema(t.q)
    expect(sampled).toBe(1)
    expect(fields.map((f) => f.field)).toEqual(["msg_id", "order_no", "seq", "amount"])
  })

  it("skips a file larger than consume's size limit, as consume would never accept it", async () => {
    await using t = await tempQueue()
    t.put("inbox", "small.json", base)
    t.put("inbox", "huge.json", { ...base, padding: "x".repeat(1024 * 1024) })
    const { fields, sampled } = inferSchema(t.q)
    expect(sampled).toBe(1)
    expect(fields.map((f) => f.field)).not.toContain("padding")
  })

  it("skips a symbolic link and a FIFO named *.json without blocking", async () => {
    await using t = await tempQueue()
    t.put("done", "real.json", { ...base, via_link: 1 })
    fs.symlinkSync(join(t.q.done, "real.json"), join(t.q.inbox, "link.json"))
    const mkfifo = Bun.spawnSync(["mkfifo", join(t.q.inbox, "pipe.json")])
    expect(mkfifo.exitCode).toBe(0)
    const { fields, sampled } = inferSchema(t.q)
    expect(sampled).toBe(1)
    expect(fields.find((f) => f.field === "via_link")?.count).toBe(1)
  })

  it("reads inbox/, processing/ and done/ and counts each field", async () => {
    await using t = await tempQueue()
    t.put("inbox", "a.json", { ...base, a: 1 })
    t.put("processing", "b.json", { ...base, b: 1 })
    t.put("done", "c.json", { ...base, a: 2, c: 1 })
    const { fields, sampled } = inferSchema(t.q)
    expect(sampled).toBe(3)
    expect(Object.fromEntries(fields.map((f) => [f.field, f.count]))).toEqual({
      msg_id: 3,
      order_no: 3,
      seq: 3,
      amount: 3,
      a: 2,
      b: 1,
      c: 1,
    })
  })

  it("stops after the sample limit", async () => {
    await using t = await tempQueue()
    for (let i = 0; i < 5; i++) t.put("inbox", `${i}.json`, base)
    expect(inferSchema(t.q, 2).sampled).toBe(2)
  })

  it("finds no fields in an empty queue", async () => {
    await using t = await tempQueue()
    expect(inferSchema(t.q)).toEqual({ fields: [], sampled: 0 })
  })
})

describe("formatSchema", () => {
  it("starts with exactly field,type,role and quotes fields that need it", () => {
    expect(
      formatSchema([
        { field: "msg_id", type: "string", role: "idempotency-key", count: 1 },
        { field: "a,b", type: "integer|string", role: "attribute", count: 1 },
      ]),
    ).toBe('field,type,role\nmsg_id,string,idempotency-key\n"a,b",integer|string,attribute\n')
  })

  it("is only the header when there are no fields", () => {
    expect(formatSchema([])).toBe("field,type,role\n")
  })
})
