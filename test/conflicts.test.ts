import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { snapshot, spool, tempQueue } from "@spool/test-support"

const first = { msg_id: "m-1", order_no: "O-1", seq: 1, amount: 10.5, note: "first" }

describe("conflicting duplicates", () => {
  it("treats a redelivery with the same content in another layout as an ordinary duplicate", async () => {
    await using q = await tempQueue({
      seed: {
        "a.json": JSON.stringify(first),
        "b.json": `{\n  "note": "first", "amount": 10.5,\n  "seq": 1, "order_no": "O-1", "msg_id": "m-1"\n}\n`,
      },
    })
    const r = await spool("consume", ["--root", q.root])
    expect(r.stdout).toBe("")
    expect(r.stderr).not.toContain("msg=conflict")
    expect(r.stderr).toContain("conflicts=0")
    expect(r.exitCode).toBe(0)
    const s = snapshot(q.root)
    expect(s.duplicates).toEqual([expect.objectContaining({ msg_id: "m-1", is_conflict: 0 })])
    expect(fs.readFileSync(join(q.root, "conflicts.csv"), "utf8")).toBe(
      "msg_id,file,processed_file,content_hash,processed_content_hash\n",
    )
  })

  it("records, reports and warns about a known msg_id redelivered with different content; the first one wins", async () => {
    await using q = await tempQueue({
      seed: { "a.json": first, "b, changed.json": { ...first, amount: 99.99 } },
    })
    const r = await spool("consume", ["--root", q.root])
    expect(r.stdout).toBe("")
    expect(r.stderr).toMatch(/level=warn msg=conflict file="b, changed.json" msg_id=m-1/)
    expect(r.exitCode).toBe(0)
    const s = snapshot(q.root)
    expect(s.processed).toEqual([expect.objectContaining({ msg_id: "m-1", amount: "10.5", file: "a.json" })])
    expect(s.duplicates).toEqual([expect.objectContaining({ msg_id: "m-1", file: "b, changed.json", is_conflict: 1 })])
    expect(s.dupTxt).toBe("m-1\n")
    const csv = fs.readFileSync(join(q.root, "conflicts.csv"), "utf8").split("\n")
    expect(csv[0]).toBe("msg_id,file,processed_file,content_hash,processed_content_hash")
    expect(csv[1]).toMatch(/^m-1,"b, changed.json",a\.json,[0-9a-f]{64},[0-9a-f]{64}$/)
    expect(csv).toHaveLength(3)
  })
})
