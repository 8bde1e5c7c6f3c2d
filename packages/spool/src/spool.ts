// The spool command: one entry point for every tool, each subcommand the same main() its own
// entry point runs. It lives in a package of its own because it depends on consumer and ops,
// which depend on @spool/cli: the dispatcher there is generic, the table here is spool's.
import { type CommandTable, type DispatcherSpec, dispatch } from "@spool/cli"

/** Every spool tool by its subcommand name, imported only when it runs (or for `spool --help`). */
export const commands = {
  consume: () => import("@spool/consumer/consume"),
  setup: () => import("@spool/consumer/setup"),
  schema: () => import("@spool/consumer/schema"),
  enqueue: () => import("@spool/consumer/enqueue"),
  "order-check": () => import("@spool/consumer/order-check"),
  compact: () => import("@spool/consumer/compact"),
  stats: () => import("@spool/consumer/stats"),
  verify: () => import("@spool/consumer/verify"),
  list: () => import("@spool/consumer/list"),
  show: () => import("@spool/consumer/show"),
  lag: () => import("@spool/ops/lag"),
  replay: () => import("@spool/ops/replay"),
  delete: () => import("@spool/ops/delete"),
  serve: () => import("@spool/serve/serve"),
  completion: async () => {
    const m = await import("./shell.ts")
    return { spec: m.completionSpec, main: m.completion }
  },
  man: async () => {
    const m = await import("./shell.ts")
    return { spec: m.manSpec, main: m.man }
  },
} satisfies CommandTable

/** True for the commands that stop at a safe point on SIGINT, SIGTERM or SIGHUP (see @spool/cli/stop). */
export function stopsCleanly(command: string | undefined): boolean {
  return command === "consume" || command === "compact"
}

/** The `spool` command's description. */
export const spool: DispatcherSpec = {
  name: "spool",
  summary:
    "spool consumes a directory queue (inbox/ processing/ done/ error/) into a ledger with exactly-once effects.",
  commands,
  examples: [
    { args: "setup --root /srv/spool/orders", does: "create an empty queue" },
    { args: "consume --root /srv/spool/orders -q", does: "drain it once, silent unless something needs a person" },
    { args: "help lag", does: "lag's arguments and options" },
  ],
}

/** `spool COMMAND ...`: runs that command. */
export function main(argv: readonly string[]): Promise<number> {
  return dispatch(spool, argv)
}
