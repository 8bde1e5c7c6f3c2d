// The bench's C contenders (bench/floor.c, floor-2t.c, renames.c), each run as the bench runs
// it on a small generated queue, batches of 1,000 and a last partial one: every figure consume
// is compared with is measured against them, so each must leave the queue exactly as the bench's
// end-state check demands (nothing left in inbox/ or processing/, no file lost or doubled, one
// processed row per distinct msg_id), or its run throws.
import { afterAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { missingTest, tempDir } from "@spool/test-support"
import { buildFloor, runOne } from "../bench/contenders.ts"
import { type Expected, generate } from "../bench/generated-queue.ts"

const provides = "installs every program"
const itWithCc =
  Bun.which("cc") === null
    ? missingTest("cc is not installed (apt-get install gcc libc6-dev)", provides)
    : fs.existsSync("/usr/include/sqlite3.h")
      ? it
      : missingTest("the SQLite header is not installed (apt-get install libsqlite3-dev)", provides)

const dir = await tempDir("spool-bench-c-")
afterAll(() => dir[Symbol.asyncDispose]())
let prepared: { master: string; expected: Expected } | undefined

/** The C programs built (once, unless already newer than their sources) and the queue generated. */
function prepare(): { master: string; expected: Expected } {
  if (prepared !== undefined) return prepared
  buildFloor()
  const master = join(dir.path, "master")
  fs.mkdirSync(master)
  prepared = { master, expected: generate(master, 2345) }
  return prepared
}

describe("the bench's C contenders", () => {
  for (const contender of ["floor", "floor-2t", "renames", "renames-2t"])
    itWithCc(`${contender} drains a generated queue and leaves the end state the bench checks`, async () => {
      const { master, expected } = prepare()
      expect(expected.bad).toBeGreaterThan(0)
      expect(expected.duplicates).toBeGreaterThan(0)
      const m = await runOne(contender, 1, dir.path, master, expected)
      expect(m.messagesPerSecond).toBeGreaterThan(0)
      expect(m.batchP50Ms).toBeGreaterThan(0)
    })
})
