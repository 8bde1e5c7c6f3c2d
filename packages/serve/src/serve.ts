import fs from "node:fs"
import { type CommandSpec, duration, integer, ledger, root, runCommand, text } from "@spool/cli"
import {
  checkRootLedger,
  describeSource,
  openQueue,
  quoteName,
  resolveLedgerUrl,
  resolveRoot,
  SpoolError,
} from "@spool/core/engine"
import { createApp } from "./app.ts"
import type { Source } from "./read.ts"

/** `spool serve`'s options and help. */
export const spec = {
  name: "serve",
  usage:
    "spool serve [--root DIR] [--ledger URL] [--port N] [--host ADDR] [--allow-host NAME]... [--token-file PATH] [--window DURATION] [--stalled-after DURATION] [--source URL]...",
  summary: "A web console: overview, failures, deferred files, a message's history, /metrics and /healthz.",
  description:
    "Serves HTML pages and the JSON they are made of: the overview (files per directory with lag's age\n" +
    "histogram, OK or stalled in lag's words, stats' figures, the consumers holding claims, and the backlog\n" +
    "each broker source holds, as its broker tells it), the error/ files by class and reason with every\n" +
    "attempt's detail, the deferred/ files with their next attempt, and a\n" +
    "file's or msg_id's history as spool show gives it. /metrics is the Prometheus text of lag and stats;\n" +
    "/healthz answers 200, or 503 with the reason when the root or its ledger cannot be read. A reading\n" +
    "opens the ledger read-only for one short read, so a consumer never waits on it, and answers every\n" +
    "page and scrape while it is fresh: at least a second, longer when the queue is slow to read\n" +
    "(docs/console.md); a stale one answers while the next is made.\n" +
    "The broker sources are those the ledger keeps origins of, without their passwords: give each one\n" +
    "that needs a password with --source, as consume was given it.\n" +
    "Read-only unless --token-file names a file holding a token: then whoever logs in with it at /login\n" +
    "can replay and delete from the failures page, with a dry run first, through spool replay and spool\n" +
    "delete themselves; each such POST needs the token, a CSRF token and the console's own origin, and is\n" +
    "logged on stderr with its time and address. Listens on 127.0.0.1 unless --host says otherwise; put\n" +
    "it behind a reverse proxy for TLS (docs/console.md). On a loopback address it answers only requests\n" +
    "for localhost, 127.0.0.1, ::1 and each --allow-host name (the name a reverse proxy passes on as Host):\n" +
    "a web page whose name was made to point at this host (DNS rebinding) is refused. Runs until interrupted.",
  options: {
    root,
    ledger,
    port: integer("the TCP port to listen on (0: any free port, printed at start)", { default: "8787", min: 0 }),
    host: text("ADDR", "the address to listen on", { default: "127.0.0.1" }),
    "allow-host": text(
      "NAME",
      "a host name the console answers to on a loopback address, besides localhost (repeatable)",
      {
        multiple: true,
      },
    ),
    "token-file": text("PATH", "a file holding the token (16 characters or more) that allows replay and delete"),
    window: duration("the window of stats' recent figures, e.g. 15m, 24h", { default: "24h", min: 1 }),
    source: text("URL", "a broker source whose backlog the overview shows, with its password (repeatable)", {
      multiple: true,
    }),
    "stalled-after": duration("stalled when files wait and nothing finished for this long, as lag says", {
      default: "10m",
      min: 1,
    }),
  },
  exitCodes: [0, 1, 2, 3],
  examples: [
    { args: "--root /srv/spool/orders", does: "the console on http://127.0.0.1:8787/" },
    {
      args: "--root /srv/spool/orders --port 9100 --stalled-after 5m",
      does: "on another port, stalled after 5 minutes",
    },
  ],
} satisfies CommandSpec

/** `spool serve`: the console, until a signal ends the process. */
export async function main(argv: readonly string[]): Promise<number> {
  return runCommand(spec, argv, async ({ values: v, texts }) => {
    if (v.host.trim() === "")
      throw new SpoolError("usage", "--host is empty, which would listen on every address; give one, e.g. 127.0.0.1")
    if (v.port > 65535) throw new SpoolError("usage", `--port takes 0 to 65535, not ${v.port}`)
    const queue = openQueue(resolveRoot(v.root))
    const source: Source = {
      root: queue.root,
      url: resolveLedgerUrl(v.ledger),
      windowMs: v.window,
      windowText: texts.window ?? `${v.window}ms`,
      stalledAfterSeconds: v["stalled-after"] / 1000,
      brokers: v.source ?? [],
    }
    // A root bound to PostgreSQL, served without its URL, is refused now (exit 2) as every
    // command refuses it, not answered with 503 on every page. With a URL the server is not asked
    // here: a console may start before its database, and each reading checks the binding.
    if (source.url === undefined) await checkRootLedger(queue, undefined)
    // A URL that no source adapter reads is a usage error now, not an unreachable broker on every page.
    for (const url of source.brokers ?? []) await describeSource(url)
    const token = v["token-file"] === undefined ? undefined : readToken(v["token-file"])
    const isLoopback = loopbackNames.includes(v.host.replace(/^\[(.*)\]$/, "$1"))
    const allowedHosts = isLoopback ? [...loopbackNames, ...(v["allow-host"] ?? [])] : undefined
    const server = listen(v.host, v.port, createApp(source, { token, allowedHosts }).fetch)
    const mode = token === undefined ? "read-only" : "replay and delete for the token's holders"
    if (!isLoopback)
      process.stderr.write(
        `serve: warning: listening on ${v.host} in plain HTTP: the token and the pages cross the network unencrypted; keep 127.0.0.1 and put a TLS reverse proxy in front (docs/console.md)\n`,
      )
    // The URL line last: whoever waits for it has the warning already.
    process.stderr.write(`serve: ${queue.root} on ${server.url.href} (${mode})\n`)
    // The server holds the process open; SIGINT or SIGTERM end it with their default action.
    return await new Promise<number>(() => {})
  })
}

/** The names of this host's loopback addresses, which a page elsewhere cannot be served from. */
const loopbackNames = ["localhost", "127.0.0.1", "::1"]

/** The token in `path`, without the line end; a short or unreadable one is a usage error. */
function readToken(path: string): string {
  let text: string
  try {
    text = fs.readFileSync(path, "utf8")
  } catch (error) {
    throw new SpoolError("usage", `cannot read --token-file ${quoteName(path)}: ${(error as Error).message}`)
  }
  const token = text.trim()
  const mode = fs.statSync(path).mode
  if ((mode & 0o077) !== 0)
    process.stderr.write(
      `serve: warning: --token-file ${quoteName(path)} may be read by other users (mode 0${(mode & 0o777).toString(8)}): whoever reads it can replay and delete; chmod 600 it\n`,
    )
  if (token.length < 16)
    throw new SpoolError(
      "usage",
      `--token-file ${quoteName(path)} holds ${token.length} characters; put a token of 16 or more in it (openssl rand -hex 32)`,
    )
  return token
}

/** The largest request body the console reads (a failures page's form of 500 names is under 200 KB). */
const maxBodyBytes = 1024 * 1024

/** Bun.serve, its failure to listen said as what to do (exit 3): the port taken, or the address not this host's. */
function listen(
  host: string,
  port: number,
  fetch: (request: Request) => Response | Promise<Response>,
): Bun.Server<undefined> {
  try {
    // A form of replay or delete holds at most a page of names: a larger body is refused unread.
    return Bun.serve({ hostname: host, port, fetch, maxRequestBodySize: maxBodyBytes })
  } catch (error) {
    const code = (error as { code?: unknown }).code
    const why =
      code === "EADDRINUSE"
        ? "the port is in use: stop what holds it, or choose another --port"
        : code === "EADDRNOTAVAIL"
          ? "the address is not one of this host's: choose another --host"
          : `${error instanceof Error ? error.message : String(error)}: check --host and --port`
    throw new SpoolError("io", `cannot listen on ${host}:${port}; ${why}`, { cause: error })
  }
}
