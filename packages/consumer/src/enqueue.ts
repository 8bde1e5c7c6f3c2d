import fs from "node:fs"
import { basename } from "node:path"
import { type CommandSpec, root, runCommand, text } from "@spool/cli"
import {
  ExitCode,
  enqueueBytes,
  errnoOf,
  maxMessageBytes,
  messageNameProblem,
  openQueue,
  type Queue,
  quoteName,
  resolveRoot,
  SpoolError,
  tooLargeInput,
} from "@spool/core/engine"

/** `bun run enqueue`'s options and help. */
export const spec = {
  name: "enqueue",
  usage: "bun run enqueue [--root DIR] FILE...   |   bun run enqueue [--root DIR] --name NAME -",
  summary: "Puts messages into inbox/ atomically (written under tmp/, then a no-replace rename).",
  description:
    "Each message is written and fsynced under ROOT/tmp/, then renamed into inbox/ without replacing\n" +
    "anything, the Maildir way, so a consumer never sees half a file. A FILE keeps its base name; `-`\n" +
    "reads one message from stdin and needs --name. If a name is already in inbox/ or an input cannot\n" +
    "be read, nothing is enqueued (exit 1 or 2).\n" +
    "Producers that write into inbox/ directly should use consume --min-age instead.",
  arguments: [{ name: "FILE...", help: "message files to copy in; - for stdin" }],
  options: {
    root,
    name: text("NAME", "its file name in inbox/, ending in .json; required with -, allowed with one FILE"),
  },
  exitCodes: [0, 1, 2, 3],
  examples: [
    { args: "--root /srv/spool/orders order-1.json order-2.json", does: "put two messages into inbox/ atomically" },
    {
      args: "--root /srv/spool/orders --name order-3.json - < order.json",
      does: "put a message read from stdin, under the name order-3.json",
    },
  ],
} satisfies CommandSpec

interface Input {
  readonly source: string
  readonly name: string
  readonly data: Uint8Array
}

/** `bun run enqueue`: atomic producer-side writes into a queue's inbox. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values, positionals, quiet }) => {
    if (positionals.length === 0) throw new SpoolError("usage", "give at least one FILE, or - with --name")
    if (values.name !== undefined && positionals.length > 1)
      throw new SpoolError("usage", "--name names one message; give exactly one FILE or -")
    if (positionals.includes("-") && values.name === undefined)
      throw new SpoolError("usage", "a message read from stdin (-) needs --name NAME.json")
    const queue = openQueue(resolveRoot(values.root))
    ensureTmp(queue)
    const inputs: Input[] = []
    for (const source of positionals) {
      const name = values.name ?? basename(source)
      const problem = messageNameProblem(name)
      if (problem !== undefined) throw new SpoolError("usage", problem)
      if (inputs.some((i) => i.name === name))
        throw new SpoolError("usage", `two inputs would both be named ${quoteName(name)} in inbox/`)
      inputs.push({ source, name, data: source === "-" ? await readStdin() : readInput(source) })
    }
    const taken = inputs.filter((i) => fs.existsSync(`${queue.inbox}/${i.name}`))
    if (taken.length > 0)
      throw new SpoolError(
        "refused",
        `inbox/ already holds ${taken.map((i) => quoteName(i.name)).join(", ")}; nothing was enqueued (choose another name with --name, or wait for consume)`,
      )
    let code: number = ExitCode.ok
    for (const i of inputs) {
      let isQueued: boolean
      try {
        isQueued = enqueueBytes(queue, i.name, i.data)
      } catch (error) {
        if (errnoOf(error) === "ENOSPC")
          throw new SpoolError(
            "io",
            `the disk holding ${queue.tmp} is full; ${quoteName(i.name)} and later inputs were not enqueued`,
          )
        throw error
      }
      if (isQueued) {
        if (!quiet) process.stdout.write(`${quoteName(i.name)}\n`)
      } else {
        process.stderr.write(
          `enqueue: ${quoteName(`inbox/${i.name}`)} appeared meanwhile; ${quoteName(i.source)} was not enqueued\n`,
        )
        code = ExitCode.check
      }
    }
    return code
  })
}

function readInput(path: string): Uint8Array {
  try {
    const size = fs.statSync(path).size
    if (size > maxMessageBytes) throw tooLargeInput(quoteName(path), size)
    return fs.readFileSync(path)
  } catch (error) {
    if (error instanceof SpoolError) throw error
    // The runtime hands spool its arguments as UTF-8: a name that is not arrives with U+FFFD in it.
    const hint = path.includes("\uFFFD")
      ? " (its name is not UTF-8, and reached spool changed: enqueue its directory with setup --from, or give its bytes with --name NAME -)"
      : ""
    throw new SpoolError(
      "usage",
      `cannot read ${path}: ${errnoOf(error) ?? String(error)}${hint}; nothing was enqueued`,
    )
  }
}

/** Standard input, read to its end or refused once past what a message may have. */
async function readStdin(): Promise<Uint8Array> {
  const chunks: Uint8Array[] = []
  let size = 0
  for await (const chunk of Bun.stdin.stream()) {
    size += chunk.length
    if (size > maxMessageBytes) throw tooLargeInput("standard input", size)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
}

/** Queues made before tmp/ existed get it here; it must share inbox/'s filesystem for the rename. */
function ensureTmp(queue: Queue): void {
  fs.mkdirSync(queue.tmp, { recursive: true, mode: 0o755 })
  if (fs.statSync(queue.tmp).dev !== fs.statSync(queue.inbox).dev)
    throw new SpoolError("cross-device", `${queue.tmp} must be on the same filesystem as ${queue.inbox}`)
}
