// `bun run schema`: schema.csv from the well-formed messages of a queue.
import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { spool, tempQueue } from "@spool/test-support"

const sampleSchema = `field,type,role
msg_id,string,idempotency-key
order_no,string,ordering-key
seq,integer,sequence
amount,number,amount
currency,string,attribute
customer,string,attribute
sent_at,string,attribute
`

describe("bun run schema", () => {
  it("writes schema.csv for the sample and prints it, from the 18 well-formed messages", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    const r = await spool("schema", ["--root", q.root])
    expect(r.stdout).toBe(sampleSchema)
    expect(r.stderr).toBe(`schema: 7 field(s) from 18 well-formed message(s) -> ${join(q.root, "schema.csv")}\n`)
    expect(r.exitCode).toBe(0)
    expect(fs.readFileSync(join(q.root, "schema.csv"), "utf8")).toBe(sampleSchema)
  })

  it("gives the same schema after consume, reading the messages in done/", async () => {
    await using q = await tempQueue({ seed: "fixtures" })
    expect((await spool("consume", ["--root", q.root])).exitCode).toBe(0)
    const r = await spool("schema", ["--root", q.root])
    expect(r.stdout).toBe(sampleSchema)
    expect(r.stderr).toContain("from 18 well-formed message(s)")
    expect(r.exitCode).toBe(0)
    expect(fs.readFileSync(join(q.root, "schema.csv"), "utf8")).toBe(sampleSchema)
  })

  it("names every JSON type of generated messages, and bad messages add no field", async () => {
    const base = (i: number) => ({ msg_id: `m${i}`, order_no: "A", seq: i + 1, amount: i + 0.5 })
    await using q = await tempQueue({
      seed: {
        "0.json": { ...base(0), flag: true, tags: ["a"], meta: { k: 1 }, qty: 2, ratio: 1, note: "x", gone: null },
        "1.json": { ...base(1), flag: false, tags: [], meta: {}, qty: 3, ratio: 0.25, note: null },
        "2.json": { ...base(2), amount: 7 },
        "bad-parse.json": '{"msg_id": "x", "from_broken": 1',
        "bad-missing.json": { msg_id: "x", seq: 1, amount: 1, from_missing: "y" },
        "bad-invalid.json": { ...base(3), seq: 0, from_invalid: "z" },
        "bad-array.json": [{ ...base(4), from_array: 1 }],
      },
    })
    const expected = `field,type,role
msg_id,string,idempotency-key
order_no,string,ordering-key
seq,integer,sequence
amount,number,amount
flag,boolean,attribute
gone,null,attribute
meta,object,attribute
note,string,attribute
qty,integer,attribute
ratio,number,attribute
tags,array,attribute
`
    const r = await spool("schema", ["--root", q.root])
    expect(r.stdout).toBe(expected)
    expect(r.stderr).toBe(`schema: 11 field(s) from 3 well-formed message(s) -> ${join(q.root, "schema.csv")}\n`)
    expect(r.exitCode).toBe(0)
    expect(fs.readFileSync(join(q.root, "schema.csv"), "utf8")).toBe(expected)
  })

  it("writes only the header for a queue with no well-formed message", async () => {
    await using q = await tempQueue({ seed: { "bad.json": "nope" } })
    const r = await spool("schema", ["--root", q.root])
    expect(r.stdout).toBe("field,type,role\n")
    expect(r.stderr).toBe(`schema: 0 field(s) from 0 well-formed message(s) -> ${join(q.root, "schema.csv")}\n`)
    expect(r.exitCode).toBe(0)
  })

  it("exits 2 for a root that is not a queue", async () => {
    await using q = await tempQueue()
    const root = join(q.path, "nowhere")
    const r = await spool("schema", ["--root", root])
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain("is not a spool queue")
    expect(r.stderr).toContain("bun run setup")
    expect(r.exitCode).toBe(2)
  })
})
