import fs from "node:fs"
import { join } from "node:path"
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

/** `bun run setup`'s options and help. */
export const spec = {
  name: "setup",
  usage: "bun run setup [--root DIR] [--from DIR] [--ledger URL] [--rebind]",
  summary: "Creates an empty queue; with --from, copies messages into its inbox/.",
  description:
    "Creates ROOT/{inbox,processing,done,error,deferred} (and tmp/, where files are written before\n" +
    "they are renamed into inbox/). With --from it then copies every regular *.json file directly in\n" +
    "DIR into inbox/, skipping names already anywhere in the queue, so running it twice changes nothing.\n" +
    "A ROOT inside another queue's directories (its inbox/, error/, ...) is refused.\n" +
    "With --ledger (or SPOOL_LEDGER_URL) the root is bound to that PostgreSQL ledger from the\n" +
    "start; without, the first consume binds it to ROOT/ledger.db. Every command then opens the\n" +
    "root's own ledger and refuses another. --rebind moves the binding on purpose (see docs/postgres.md).",
  options: {
    root,
    from: text("DIR", "directory of messages to copy into inbox/", { fallback: "none: the queue starts empty" }),
    ledger: { ...ledger, help: "bind the root to the PostgreSQL ledger at URL", fallback: "$SPOOL_LEDGER_URL" },
    rebind: flag(
      "bind an already bound root to --ledger URL, or to ROOT/ledger.db without one; the new ledger holds none of the old one's keys unless you copied them",
    ),
  },
  exitCodes: [0, 2, 3],
  examples: [
    { args: "--root /srv/spool/orders", does: "create an empty queue there" },
    {
      args: "--root /srv/spool/orders --ledger postgres://spool@db/spool",
      does: "create it bound to a PostgreSQL ledger shared by several hosts",
    },
    { args: "--root ./spool --from fixtures", does: "create a queue and copy the sample messages into its inbox/" },
  ],
} satisfies CommandSpec

/** `bun run setup`: create a queue and seed its inbox. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values, quiet }) => {
    const from = values.from
    // Check the source first: a typo in --from must not leave a half-made queue behind.
    const st = from === undefined ? undefined : fs.statSync(from, { throwIfNoEntry: false })
    if (from !== undefined && !st?.isDirectory())
      throw new SpoolError(
        "usage",
        `--from ${from} ${st ? "is not a directory" : "does not exist"}; give a directory of .json message files`,
      )
    const url = resolveLedgerUrl(values.ledger)
    const queue = createQueue(resolveRoot(values.root))
    if (values.rebind === true) await rebind(queue, url, quiet)
    else if (url !== undefined) await (await openLedger(queue, { url })).close()
    if (from === undefined) {
      if (!quiet) process.stderr.write(`setup: queue ready at ${queue.root}\n`)
      return ExitCode.ok
    }
    const s = seedFrom(queue, from)
    if (!quiet)
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
async function rebind(queue: Queue, url: string | undefined, quiet: boolean): Promise<void> {
  const { before, after } = await rebindRoot(queue, url)
  const name = (b: Binding | undefined) =>
    b === undefined ? "no ledger" : b.backend === "sqlite" ? join(queue.root, "ledger.db") : (b.where ?? "PostgreSQL")
  if (quiet) return
  const was = name(before)
  process.stderr.write(
    was === name(after)
      ? `setup: ${queue.root} is bound to ${was} already; nothing changed\n`
      : `setup: ${queue.root} is now bound to ${name(after)} (it was bound to ${was})\n`,
  )
}
