#!/usr/bin/env bun
// `replay` or `delete` exactly as spool runs them, for the console's POSTs: one process per
// request, so their refusals, output and exit codes are the commands' own.
import { setInvocation } from "@spool/cli"

const [name, ...args] = process.argv.slice(2)
const command =
  name === "replay"
    ? await import("@spool/ops/replay")
    : name === "delete"
      ? await import("@spool/ops/delete")
      : undefined
if (command === undefined) {
  process.stderr.write(`operate: replay or delete, not ${JSON.stringify(name)}\n`)
  process.exitCode = 2
} else {
  setInvocation(`spool ${name}`)
  process.exitCode = await command.main(args)
}
