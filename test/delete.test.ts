// `delete` end to end on both ledgers: the real command as a process on a queue the real consume
// has drained (the sample: error/ holds a parse and a missing-field failure), and on a message a
// library application deferred. What was thrown away stops counting in stats, the metrics and
// error.csv, and a deferred message never comes back.
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import {
  type BackendQueue,
  ledgerBackends,
  list,
  type QueueTemplate,
  repoRoot,
  run,
  templateOf,
  tempQueue,
} from "@spool/test-support"

const broken = "evt-broken-0001.json"
const noOrder = "evt-noorder-0002.json"
const app = join(import.meta.dir, "apps", "transient.ts")

const openFailures = async (q: BackendQueue) => JSON.parse((await q.command("stats", ["--json"])).stdout).openFailures
const errorCsv = (q: BackendQueue) => fs.readFileSync(join(q.root, "error.csv"), "utf8")

/** Runs the transient-failure app (test/apps/transient.ts) once on `q`, downstream down while `down` exists. */
async function runApp(q: BackendQueue, down: string, env: Record<string, string> = {}) {
  const proc = Bun.spawn(["bun", app, q.root], {
    env: { ...process.env, NO_COLOR: "1", SPOOL_LEDGER_URL: q.url ?? "", DOWN: down, ...env },
    stdout: "pipe",
    stderr: "pipe",
    stdin: "ignore",
  })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ])
  expect(stderr).toBe("")
  expect(exitCode).toBe(0)
  return JSON.parse(stdout) as Record<string, number>
}

for (const backend of await ledgerBackends())
  (backend.skip ? describe.skip : describe)(`delete on ${backend.name}`, () => {
    let template: QueueTemplate
    beforeAll(async () => {
      const q = await backend.queue({ seed: "fixtures" })
      expect((await q.command("consume")).exitCode).toBe(0)
      expect(list(join(q.root, "error"))).toEqual([broken, noOrder])
      template = templateOf(q)
    })
    afterAll(() => template[Symbol.asyncDispose]())

    it("deletes a named file from error/, and stats, the metrics and error.csv stop counting it", async () => {
      await using q = await template.copy()
      expect(await openFailures(q)).toEqual({ parse: 1, "missing-field": 1 })
      const r = await q.command("delete", [broken])
      expect(r.stdout).toBe(`error/${broken}\n`)
      expect(r.stderr).toBe("delete: deleted 1 of 1 selected file, refused 0\n")
      expect(r.exitCode).toBe(0)
      expect(list(join(q.root, "error"))).toEqual([noOrder])
      expect(await openFailures(q)).toEqual({ "missing-field": 1 })
      const metrics = (await q.command("stats", ["--format", "prometheus"])).stdout
      expect(metrics.split("\n").filter((l) => l.startsWith("spool_open_failures{"))).toEqual([
        expect.stringContaining('reason="missing-field"'),
      ])
      expect(errorCsv(q)).toBe(`file,reason\n${noOrder},missing-field\n`)
      expect(await q.rows("SELECT file, dir FROM deletions")).toEqual([{ file: broken, dir: "error" }])
      expect(await q.rows("SELECT reason FROM failures WHERE deleted_at IS NOT NULL")).toEqual([{ reason: "parse" }])
      const shown = JSON.parse((await q.command("show", ["--json", broken])).stdout)
      expect(shown.timeline.map((e: { event: string }) => e.event)).toEqual(["failed", "deleted"])
    })

    it("stops counting a file removed by hand, and closes its failure when delete names it later", async () => {
      await using q = await template.copy()
      fs.rmSync(join(q.root, "error", broken))
      expect(await openFailures(q)).toEqual({ "missing-field": 1 })
      expect(await q.rows("SELECT file FROM failures WHERE deleted_at IS NULL ORDER BY file")).toEqual([
        { file: broken },
        { file: noOrder },
      ])
      const r = await q.command("delete", [broken])
      expect(r.stdout).toBe(`error/${broken}\n`)
      expect(r.stderr).toBe(
        `delete: error/${broken} was already gone; its failure is closed\ndelete: deleted 1 of 1 selected file, refused 0\n`,
      )
      expect(r.exitCode).toBe(0)
      expect(await q.rows("SELECT file FROM failures WHERE deleted_at IS NULL")).toEqual([{ file: noOrder }])
      const again = await q.command("delete", [broken])
      expect(again.stderr).toContain(`delete: refused error/${broken}: there is no such file in error/\n`)
      expect(again.exitCode).toBe(1)
    })

    it("selects by reason, class or glob as replay does, with --dry-run changing nothing", async () => {
      await using q = await template.copy()
      const dry = await q.command("delete", ["--class", "format", "--dry-run"])
      expect(dry.stdout).toBe(`error/${broken}\nerror/${noOrder}\n`)
      expect(dry.stderr).toBe(
        "delete: dry run: 2 of 2 selected files would be deleted, 0 refused; nothing was changed\n",
      )
      expect(dry.exitCode).toBe(0)
      expect(list(join(q.root, "error"))).toEqual([broken, noOrder])
      const byReason = await q.command("delete", ["--reason", "missing-field", "-q"])
      expect([byReason.stdout, byReason.stderr, byReason.exitCode]).toEqual(["", "", 0])
      expect(list(join(q.root, "error"))).toEqual([broken])
      const byGlob = await q.command("delete", ["--match", "evt-broken-*"])
      expect(byGlob.stdout).toBe(`error/${broken}\n`)
      expect(await openFailures(q)).toEqual({})
      expect(errorCsv(q)).toBe("file,reason\n")
    })

    it("keeps files younger than --older-than, by when they entered error/", async () => {
      await using q = await template.copy()
      const young = await q.command("delete", ["--reason", "parse", "--older-than", "1h"])
      expect(young.stdout).toBe("")
      expect(young.stderr).toBe("delete: deleted 0 of 1 selected file, kept 1 younger than --older-than, refused 0\n")
      expect(list(join(q.root, "error"))).toEqual([broken, noOrder])
      const later = await q.command("delete", ["--reason", "parse", "--older-than", "1h"], {
        SPOOL_CLOCK_OFFSET: "+2h",
      })
      expect(later.stdout).toBe(`error/${broken}\n`)
      expect(list(join(q.root, "error"))).toEqual([noOrder])
    })

    it("refuses what is not a file in error/ and still deletes the others (exit 1)", async () => {
      await using q = await template.copy()
      fs.mkdirSync(join(q.root, "error", "dir.json"))
      fs.writeFileSync(join(q.root, "keep.json"), "{}")
      const r = await q.command("delete", ["nope.json", "dir.json", "../keep.json", noOrder])
      expect(r.stdout).toBe(`error/${noOrder}\n`)
      expect(r.stderr.split("\n")).toEqual([
        "delete: refused error/nope.json: there is no such file in error/",
        "delete: refused error/dir.json: error/ holds a directory under that name; inspect it and remove it by hand",
        "delete: refused error/../keep.json: give a name directly in error/, or deferred/NAME, not ../keep.json",
        "delete: deleted 1 of 4 selected files, refused 3",
        "",
      ])
      expect(r.exitCode).toBe(1)
      expect(fs.existsSync(join(q.root, "keep.json"))).toBe(true)
      expect(list(join(q.root, "error"))).toEqual(["dir.json", broken])
    })

    it("deletes a deferred message named deferred/NAME: it never comes back when due, and nothing blocks its name", async () => {
      await using q = await backend.queue({ seed: { "f-1.json": { msg_id: "m-1", order_no: "O", seq: 1, amount: 1 } } })
      const down = join(q.root, "..", `down-${crypto.randomUUID()}`)
      fs.writeFileSync(down, "")
      // Due in an hour: the later run reads this host's clock two hours on (SPOOL_CLOCK_OFFSET).
      const env = { DEFER_FIRST_MS: "3600000", DEFER_MAX_MS: "3600000", DEFER_MAX_AGE_MS: "86400000" }
      expect(await runApp(q, down, env)).toMatchObject({ deferred: 1 })
      expect(list(join(q.root, "deferred"))).toEqual(["f-1.json"])
      const selection = await q.command("delete", ["--match", "f-*"])
      expect([selection.stderr, selection.exitCode]).toEqual([
        "delete: the selection selects no file in error/; nothing was changed\n",
        0,
      ])
      const r = await q.command("delete", ["deferred/f-1.json"])
      expect(r.stdout).toBe("deferred/f-1.json\n")
      expect(r.exitCode).toBe(0)
      expect(await q.rows("SELECT file FROM deferrals")).toEqual([])
      fs.rmSync(down)
      expect(await runApp(q, down, { ...env, SPOOL_CLOCK_OFFSET: "+2h" })).toMatchObject({ claimed: 0, processed: 0 })
      expect(await q.rows("SELECT msg_id FROM applied")).toEqual([])
      expect(list(join(q.root, "deferred"))).toEqual([])
      // A new delivery of the same name is taken as any other.
      q.put("f-1.json", { msg_id: "m-1", order_no: "O", seq: 1, amount: 1 })
      expect(await runApp(q, down)).toMatchObject({ processed: 1 })
      expect(await q.rows("SELECT msg_id FROM applied")).toEqual([{ msg_id: "m-1" }])
    }, 60_000)
  })

describe("delete on a root with no ledger yet", () => {
  it("removes the file and creates no ledger: nothing was recorded about it to close", async () => {
    await using q = await tempQueue()
    fs.writeFileSync(join(q.root, "error", "stray.json"), "{}")
    const r = await run(["bun", join(repoRoot, "scripts/delete.ts"), "--root", q.root, "stray.json"])
    expect(r.stdout).toBe("error/stray.json\n")
    expect(r.exitCode).toBe(0)
    expect(list(join(q.root, "error"))).toEqual([])
    expect(fs.existsSync(join(q.root, "ledger.db"))).toBe(false)
  })
})
