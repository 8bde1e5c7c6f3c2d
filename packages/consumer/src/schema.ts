import { join } from "node:path"
import { type CommandSpec, runCommand } from "@spool/cli"
import { ExitCode, formatSchema, inferSchema, openQueue, reportFiles, resolveRoot, writeFileAtomic } from "@spool/core"

const spec = {
  name: "schema",
  usage: "bun run schema [--root DIR]",
  summary:
    "Works out the message structure from the well-formed messages in inbox/, processing/ and done/\n" +
    "and writes ROOT/schema.csv (field,type,role), also printed to stdout.",
  options: { root: { type: "string" } },
  help: ["--root DIR            queue root (default: $SPOOL_ROOT, else ./spool)"],
} satisfies CommandSpec<Record<string, { type: "string" }>>

/** `bun run schema`: infer schema.csv from the queue's messages. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, ({ values }) => {
    const queue = openQueue(resolveRoot(values.root))
    const { fields, sampled } = inferSchema(queue)
    const text = formatSchema(fields)
    writeFileAtomic(join(queue.root, reportFiles.schema), text)
    process.stdout.write(text)
    process.stderr.write(
      `schema: ${fields.length} field(s) from ${sampled} well-formed message(s) -> ${join(queue.root, reportFiles.schema)}\n`,
    )
    return ExitCode.ok
  })
}
