#!/usr/bin/env bun
// The quick start: set up a queue from the bundled sample, drain it, and show what happened.
// Every step is the real command, run as its own process, exactly as an operator would.
import fs from "node:fs"
import { join, resolve } from "node:path"
import { type CommandSpec, runCommand } from "@spool/cli"
import { openExistingLedger, openQueue, redact, resolveLedgerUrl } from "@spool/core/engine"

const repo = resolve(import.meta.dir, "..")
const root = resolve(process.env.SPOOL_ROOT || join(repo, "spool"))

let isQuiet = false

async function step(title: string, cmd: string[]): Promise<number> {
  if (!isQuiet) process.stdout.write(`\n$ ${cmd.join(" ")}   # ${title}\n`)
  const p = Bun.spawn(cmd, { cwd: repo, stdio: ["ignore", isQuiet ? "ignore" : "inherit", "inherit"] })
  return p.exited
}

/** `bun run demo`'s help. */
const spec = {
  name: "demo",
  usage: "bun run demo",
  summary: "Sets up a queue from the bundled sample, drains it with the real commands, and shows the outcome.",
  description:
    "Creates the queue ./spool (or $SPOOL_ROOT) from fixtures/ with setup, then runs consume, schema,\n" +
    "order-check and lag on it, each as its own process, and prints what is where: 18 files in done/,\n" +
    "2 in error/, 15 ledger rows, 3 duplicate msg_ids, order-check OK. Running it again changes nothing.",
  options: {},
  exitCodes: [0, 1, 2],
  examples: [
    { args: "", does: "set up ./spool in the checkout from fixtures/, drain it, print the outcome" },
    { args: "-q", does: "the same, printing nothing but errors" },
  ],
} satisfies CommandSpec

process.exitCode = await runCommand(spec, process.argv.slice(2), async ({ quiet }) => {
  isQuiet = quiet
  const bin = (c: string) => join(repo, "packages/consumer/bin", `${c}.ts`)
  let failed = 0
  failed |=
    (await step("create the queue and copy the sample into inbox/", [
      "bun",
      bin("setup"),
      "--root",
      root,
      "--from",
      join(repo, "fixtures"),
    ])) !== 0
      ? 1
      : 0
  failed |= (await step("drain inbox/ into the ledger", ["bun", bin("consume"), "--root", root])) !== 0 ? 1 : 0
  failed |= (await step("work out the message structure", ["bun", bin("schema"), "--root", root])) !== 0 ? 1 : 0
  failed |= (await step("check per-order sequences", ["bun", bin("order-check"), "--root", root])) !== 0 ? 1 : 0
  const lag = await step("queue lag (exit 1 above the threshold)", ["bun", join(repo, "scripts/lag.ts"), root, "0"])
  if (lag > 1) failed = 1

  const count = (d: string) => fs.readdirSync(join(root, d)).length
  const rows = (f: string) =>
    fs.existsSync(join(root, f)) ? fs.readFileSync(join(root, f), "utf8").trimEnd().split("\n") : ["(missing)"]
  // Read through the ledger the steps used: the SQLite one in the root, or SPOOL_LEDGER_URL's.
  const url = resolveLedgerUrl(undefined)
  const ledger = await openExistingLedger(openQueue(root), { ...(url !== undefined && { url }), readonly: true })
  const processed = ledger === undefined ? 0 : (await ledger.stats(new Date())).allTime.processed
  await ledger?.close()
  const where = url === undefined ? "ledger.db" : `the ledger at ${redact(url)}`

  if (!isQuiet)
    process.stdout.write(`
Outcome in ${root}
  done/        ${count("done")} files
  error/       ${count("error")} files
  processing/  ${count("processing")} files
  inbox/       ${count("inbox")} files
  processed    ${processed} rows in ${where} (one per distinct msg_id)
  dup.txt      ${rows("dup.txt").join(" ")}
  error.csv    ${rows("error.csv").join("\n               ")}
  order-check  ${rows("order-result.txt").join(" ")}
`)
  return failed
})
