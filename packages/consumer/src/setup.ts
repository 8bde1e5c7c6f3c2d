import fs from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type CommandSpec, flag, ledger, root, runCommand, text } from "@spool/cli"
import {
  type Binding,
  createQueue,
  ExitCode,
  openLedger,
  type Queue,
  rebindRoot,
  resolveLedgerUrl,
  resolveRoot,
  SpoolError,
  seedFrom,
} from "@spool/core/engine"

/** The sample queue shipped with spool. */
export const bundledFixtures = fileURLToPath(new URL("../../../fixtures", import.meta.url))

/** `bun run setup`'s options and help. */
export const spec = {
  name: "setup",
  usage: "bun run setup [--root DIR] [--from DIR] [--ledger URL] [--rebind]",
  summary: "Creates a queue and copies messages into its inbox/.",
  description:
    "Creates ROOT/{inbox,processing,done,error} (and tmp/, where files are written before they are\n" +
    "renamed into inbox/), then copies every regular *.json file directly in --from into inbox/.\n" +
    "Names already anywhere in the queue are skipped, so running it twice changes nothing.\n" +
    "With --ledger (or SPOOL_LEDGER_URL) the root is bound to that PostgreSQL ledger from the\n" +
    "start; without, the first consume binds it to ROOT/ledger.db. Every command then opens the\n" +
    "root's own ledger and refuses another. --rebind moves the binding on purpose (see docs/postgres.md).",
  options: {
    root,
    from: text("DIR", "directory of messages to copy", { fallback: "the bundled fixtures/" }),
    ledger: { ...ledger, help: "bind the root to the PostgreSQL ledger at URL", fallback: "$SPOOL_LEDGER_URL" },
    rebind: flag(
      "bind an already bound root to --ledger URL, or to ROOT/ledger.db without one; the new ledger holds none of the old one's keys unless you copied them",
    ),
  },
} satisfies CommandSpec

/** `bun run setup`: create a queue and seed its inbox. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values }) => {
    const from = values.from ?? bundledFixtures
    // Check the source first: a typo in --from must not leave a half-made queue behind.
    const st = fs.statSync(from, { throwIfNoEntry: false })
    if (!st?.isDirectory())
      throw new SpoolError(
        "usage",
        `--from ${from} ${st ? "is not a directory" : "does not exist"}; give a directory of .json message files`,
      )
    const url = resolveLedgerUrl(values.ledger)
    const queue = createQueue(resolveRoot(values.root))
    if (values.rebind === true) await rebind(queue, url)
    else if (url !== undefined) await (await openLedger(queue, { url })).close()
    const s = seedFrom(queue, from)
    process.stderr.write(
      `setup: queue ready at ${queue.root}; copied ${s.copied} message(s) from ${from} into inbox/` +
        (s.skipped.length > 0 ? `, skipped ${s.skipped.length} already in the queue` : "") +
        "\n",
    )
    return ExitCode.ok
  })
}

/**
 * Binds `queue`'s root to another ledger, on purpose: PostgreSQL at `url` (created or migrated
 * there), or the SQLite ledger in the root. Nothing is copied: run it with no consumer running,
 * after copying the old ledger's rows if the keys must survive.
 */
async function rebind(queue: Queue, url: string | undefined): Promise<void> {
  const { before, after } = await rebindRoot(queue, url)
  const name = (b: Binding | undefined) =>
    b === undefined ? "no ledger" : b.backend === "sqlite" ? join(queue.root, "ledger.db") : (b.where ?? "PostgreSQL")
  process.stderr.write(`setup: ${queue.root} is now bound to ${name(after)} (it was bound to ${name(before)})\n`)
}
