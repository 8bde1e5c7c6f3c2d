// `bun bench/drain-cost.ts [--drains N] [--postgres]`
//
// What one drain costs beyond its files: a watching consumer drains inbox/ again at every wake,
// and a drain that finds one file, or none, pays its fixed steps for it (the run's registration,
// recovery, the scan of inbox/, the unregistration). consume() is called N times (default 300)
// in this process on a queue whose inbox/ is empty, then N times on one that gets one new file
// before each drain; the time of each call is printed as p50, p90 and p99 in milliseconds.
// The ledger is the root's SQLite one, or with --postgres a fresh PostgreSQL database on the
// server the tests use (SPOOL_TEST_PG_URL, by default postgres://postgres@127.0.0.1:5432/test).
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { tempDatabase } from "@spool/test-support"
import { consume, openLedger } from "../packages/core/src/engine.ts"
import { silentLog } from "../packages/core/src/log.ts"
import { openQueue } from "../packages/core/src/queue/root.ts"
import { fmt, percentile } from "./figures.ts"
import { message } from "./generated-queue.ts"

const { values: v } = parseArgs({
  args: process.argv.slice(2),
  options: { drains: { type: "string" }, postgres: { type: "boolean" } },
  strict: true,
})
const drains = Number(v.drains ?? 300)
if (!Number.isInteger(drains) || drains < 10) throw new Error("--drains takes a whole number of at least 10")

const base = fs.mkdtempSync(join(os.tmpdir(), "spool-drain-cost-"))
try {
  for (const d of ["inbox", "processing", "done", "error"]) fs.mkdirSync(join(base, d))
  await using pg = v.postgres === true ? await tempDatabase() : undefined
  const queue = openQueue(base)
  const ledger = await openLedger(queue, pg === undefined ? {} : { url: pg.url })
  for (const withFile of [false, true]) {
    const times: number[] = []
    for (let i = 0; i < drains; i++) {
      if (withFile) fs.writeFileSync(join(base, "inbox", `m${i}.json`), message(i))
      const start = performance.now()
      await consume({ queue, ledger, log: silentLog })
      times.push(performance.now() - start)
    }
    const [p50, p90, p99] = [50, 90, 99].map((p) => fmt(percentile(times, p), 2))
    console.log(`${withFile ? "a drain of one file" : "an empty drain"}: p50 ${p50} ms, p90 ${p90} ms, p99 ${p99} ms`)
  }
  await ledger.close()
} finally {
  fs.rmSync(base, { recursive: true, force: true })
}
