import { join } from "node:path"
import { type CommandSpec, root, runCommand } from "@spool/cli"
import { ExitCode, openQueue, reportFiles, resolveRoot, writeFileAtomic } from "@spool/core/engine"

/** `bun run schema`'s options and help. */
export const spec = {
  name: "schema",
  usage: "bun run schema [--root DIR]",
  summary: "Writes schema.csv (field,type,role) from the well-formed messages in the queue.",
  description:
    "Works out the message structure from the well-formed messages in inbox/, processing/ and done/\n" +
    "and writes ROOT/schema.csv, also printed to stdout.",
  options: { root },
  exitCodes: [0, 2, 3],
  examples: [
    { args: "--root /srv/spool/orders", does: "write schema.csv from the well-formed messages" },
    { args: "--root /srv/spool/orders -q", does: "write it and say nothing" },
  ],
} satisfies CommandSpec

/** `bun run schema`: infer schema.csv from the queue's messages. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values, quiet }) => {
    const queue = openQueue(resolveRoot(values.root))
    // Imported here, not at the top: schema inference loads @ark/schema (see engine.ts), which
    // `spool --help`, importing this module for its summary, does not need.
    const { formatSchema, inferSchema } = await import("@spool/core/schema")
    const { fields, sampled } = inferSchema(queue)
    const text = formatSchema(fields)
    writeFileAtomic(join(queue.root, reportFiles.schema), text)
    if (quiet) return ExitCode.ok
    process.stdout.write(text)
    process.stderr.write(
      `schema: ${fields.length} field(s) from ${sampled} well-formed message(s) -> ${join(queue.root, reportFiles.schema)}\n`,
    )
    return ExitCode.ok
  })
}
