import fs from "node:fs"
import { fileURLToPath } from "node:url"
import {
  type CommandSpec,
  createQueue,
  ExitCode,
  resolveRoot,
  runCommand,
  SpoolError,
  seedFrom,
} from "@spool/core/engine"

/** The sample queue shipped with spool. */
export const bundledFixtures = fileURLToPath(new URL("../../../fixtures", import.meta.url))

const spec = {
  name: "setup",
  usage: "bun run setup [--root DIR] [--from DIR]",
  summary:
    "Creates ROOT/{inbox,processing,done,error} (and tmp/, where files are written before they are\n" +
    "renamed into inbox/), then copies every regular *.json file directly in --from into inbox/.\n" +
    "Names already anywhere in the queue are skipped, so running it twice changes nothing.",
  options: { root: { type: "string" }, from: { type: "string" } },
  help: [
    "--root DIR            queue root (default: $SPOOL_ROOT, else ./spool)",
    "--from DIR            directory of messages to copy (default: the bundled fixtures/)",
  ],
} satisfies CommandSpec<Record<string, { type: "string" }>>

/** `bun run setup`: create a queue and seed its inbox. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, ({ values }) => {
    const from = values.from ?? bundledFixtures
    // Check the source first: a typo in --from must not leave a half-made queue behind.
    const st = fs.statSync(from, { throwIfNoEntry: false })
    if (!st?.isDirectory())
      throw new SpoolError(
        "usage",
        `--from ${from} ${st ? "is not a directory" : "does not exist"}; give a directory of .json message files`,
      )
    const queue = createQueue(resolveRoot(values.root))
    const s = seedFrom(queue, from)
    process.stderr.write(
      `setup: queue ready at ${queue.root}; copied ${s.copied} message(s) from ${from} into inbox/` +
        (s.skipped.length > 0 ? `, skipped ${s.skipped.length} already in the queue` : "") +
        "\n",
    )
    return ExitCode.ok
  })
}
