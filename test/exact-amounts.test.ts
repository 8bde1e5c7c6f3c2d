// Exact amounts and stored results end to end, on both ledgers: the library page's examples
// run as written (only the root and the ledger URL replaced) on amounts a double would round,
// a redelivery whose amount differs in the 17th digit is a conflict, and a redelivery gets the
// first processing's stored result.
import { Database } from "bun:sqlite"
import { afterAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { pgUnavailable, repoRoot, run, spool, tempDatabase, tempQueue } from "@spool/test-support"
import { SQL } from "bun"

const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)

const libraryPage = fs.readFileSync(join(repoRoot, "docs/library.md"), "utf8")

/** The library page's ts block that starts with `firstLine`, as written. */
function pageBlock(firstLine: string): string {
  const start = libraryPage.indexOf(`\`\`\`ts\n${firstLine}`)
  if (start < 0) throw new Error(`docs/library.md has no ts block starting with ${firstLine}`)
  const body = libraryPage.slice(start + "```ts\n".length)
  return body.slice(0, body.indexOf("```\n"))
}

// The examples run as an application's files: in a directory of their own whose node_modules
// holds the workspace's @spool packages.
const scripts = fs.mkdtempSync(join(os.tmpdir(), "spool-docs-"))
fs.mkdirSync(join(scripts, "node_modules", "@spool"), { recursive: true })
fs.symlinkSync(join(repoRoot, "packages", "core"), join(scripts, "node_modules", "@spool", "core"))
afterAll(() => fs.rmSync(scripts, { recursive: true, force: true }))

/** Writes a library page example with its root and ledger replaced, printing its summary at the end. */
function example(block: string, root: string, url?: string): string {
  const path = join(scripts, `${crypto.randomUUID()}.ts`)
  let code = block.replace('"/srv/spool/payments"', JSON.stringify(root))
  if (url !== undefined) code = code.replace('"postgres://spool@db.internal:5432/spool"', JSON.stringify(url))
  fs.writeFileSync(path, `${code}\nprocess.stdout.write(\`summary \${JSON.stringify(summary)}\\n\`)\n`)
  return path
}

const payment = (msgId: string, order: string, seq: number, amount: string) =>
  `{"msg_id":"${msgId}","order_no":"${order}","seq":${seq},"amount":${amount},"currency":"EUR"}`

const seed = {
  "a-1.json": payment("pay-big", "O-1", 1, "12345678901234567.89"),
  "a-2.json": payment("pay-tenth", "O-2", 1, "0.10"),
  "a-3.json": payment("pay-fifth", "O-2", 2, "0.20"),
  "a-4.json": payment("pay-refund", "O-3", 1, "-1"),
}
// Redeliveries: the same amount written otherwise is a duplicate; one cent less, a conflict.
const redeliveries = {
  "b-1.json": payment("pay-tenth", "O-2", 1, "0.1000"),
  "b-2.json": payment("pay-big", "O-1", 1, "12345678901234567.88"),
  "b-3.json": payment("pay-big", "O-1", 1, "1234567890123456789e-2"),
}

const backends = [
  {
    name: "SQLite",
    skip: undefined,
    block: pageBlock('import { createConsumer, Message, minorUnits } from "@spool/core"'),
    async open(root: string) {
      return {
        url: undefined,
        async rows(query: string) {
          const db = new Database(join(root, "ledger.db"), { readonly: true })
          try {
            return db.query(query).all()
          } finally {
            db.close()
          }
        },
        consume: () => spool("consume", ["--root", root], { SPOOL_LEDGER_URL: "" }),
        async [Symbol.asyncDispose]() {},
      }
    },
  },
  {
    name: "PostgreSQL",
    skip: pgSkip,
    block: pageBlock('import { createPostgresConsumer, Message, minorUnits } from "@spool/core"'),
    async open(root: string) {
      const db = await tempDatabase()
      return {
        url: db.url,
        async rows(query: string) {
          const sql = new SQL({ url: db.url, max: 1 })
          try {
            return [...(await sql.unsafe(query))]
          } finally {
            await sql.close()
          }
        },
        consume: () => spool("consume", ["--root", root, "--ledger", db.url], { SPOOL_LEDGER_URL: "" }),
        [Symbol.asyncDispose]: db[Symbol.asyncDispose],
      }
    },
  },
] as const

for (const backend of backends)
  (backend.skip ? describe.skip : describe)(`exact amounts and stored results on ${backend.name}`, () => {
    it("runs the library page's example exactly: cents from the written digits, a one-cent redelivery a conflict", async () => {
      await using q = await tempQueue({ seed })
      await using ledger = await backend.open(q.root)
      const script = example(backend.block, q.root, ledger.url)
      const first = await run(["bun", script], { env: { SPOOL_LEDGER_URL: "" } })
      expect(first.stderr).toBe("")
      expect(first.exitCode).toBe(0)
      const balances = async () =>
        (await ledger.rows("SELECT order_no, CAST(cents AS TEXT) AS cents FROM balances ORDER BY order_no")) as {
          order_no: string
          cents: string
        }[]
      expect(await balances()).toEqual([
        { order_no: "O-1", cents: "1234567890123456789" },
        { order_no: "O-2", cents: "30" },
      ])
      for (const [name, content] of Object.entries(redeliveries)) q.put(name, content)
      const again = await run(["bun", script], { env: { SPOOL_LEDGER_URL: "" } })
      expect(again.exitCode).toBe(0)
      expect(await balances()).toEqual([
        { order_no: "O-1", cents: "1234567890123456789" },
        { order_no: "O-2", cents: "30" },
      ])
      expect(
        await ledger.rows("SELECT file, CAST(is_conflict AS INTEGER) AS is_conflict FROM duplicates ORDER BY file"),
      ).toEqual([
        { file: "b-1.json", is_conflict: 0 },
        { file: "b-2.json", is_conflict: 1 },
        { file: "b-3.json", is_conflict: 0 },
      ])
      expect(await ledger.rows("SELECT msg_id, amount FROM processed WHERE msg_id = 'pay-big'")).toEqual([
        { msg_id: "pay-big", amount: "12345678901234567.89" },
      ])
      expect(await ledger.rows("SELECT file, reason FROM failures")).toEqual([{ file: "a-4.json", reason: "handler" }])
      expect(fs.readFileSync(join(q.root, "conflicts.csv"), "utf8")).toContain("b-2.json")
    })

    it("stores the handler's result with the processed row and gives it back for a redelivery", async () => {
      await using q = await tempQueue({ seed })
      await using ledger = await backend.open(q.root)
      const script = example(backend.block, q.root, ledger.url)
      expect((await run(["bun", script], { env: { SPOOL_LEDGER_URL: "" } })).exitCode).toBe(0)
      expect(await ledger.rows("SELECT msg_id, result FROM processed ORDER BY msg_id")).toEqual([
        { msg_id: "pay-big", result: '{"cents":"1234567890123456789"}' },
        { msg_id: "pay-fifth", result: '{"cents":"20"}' },
        { msg_id: "pay-tenth", result: '{"cents":"10"}' },
      ])
      // A redelivery, through a consumer that asks for outcomes: the stored result, not a new one.
      for (const [name, content] of Object.entries(redeliveries)) q.put(name, content)
      const outcomes = await run(["bun", join(import.meta.dir, "apps", "outcomes.ts"), q.root, ledger.url ?? ""], {
        env: { SPOOL_LEDGER_URL: "" },
      })
      expect(outcomes.stderr).toBe("")
      expect(
        outcomes.stdout
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l))
          .sort((x, y) => (x.file < y.file ? -1 : 1)),
      ).toEqual([
        { file: "b-1.json", verdict: "duplicate", result: { cents: "10" }, resultOf: { cents: "10" } },
        {
          file: "b-2.json",
          verdict: "conflict",
          result: { cents: "1234567890123456789" },
          resultOf: { cents: "1234567890123456789" },
        },
        {
          file: "b-3.json",
          verdict: "duplicate",
          result: { cents: "1234567890123456789" },
          resultOf: { cents: "1234567890123456789" },
        },
      ])
      // The consume command records the same redelivery as a duplicate of the library's processing.
      q.put("c-1.json", payment("pay-fifth", "O-2", 2, "0.2"))
      expect((await ledger.consume()).exitCode).toBe(0)
      expect(await ledger.rows("SELECT file FROM duplicates WHERE msg_id = 'pay-fifth'")).toEqual([
        { file: "c-1.json" },
      ])
    })
  })
