import fs from "node:fs"
import { join } from "node:path"
import { type CommandSpec, dryRun, duration, flag, holdStopRequest, ledger, root, runCommand } from "@spool/cli"
import {
  alternateName,
  ExitCode,
  notADirectory,
  openExistingLedger,
  openQueue,
  redact,
  renameNoReplace,
  resolveLedgerUrl,
  resolveRoot,
  SpoolError,
  scanDir,
  wallClock,
} from "@spool/core/engine"

/**
 * Refuses (exit 2, before a file goes there) an archive directory that is a symbolic link or not
 * a directory: files archived through a link would leave the queue root, on whatever it points at.
 */
function refuseOutsideRoot(dir: string): void {
  const what = notADirectory(dir)
  if (what === undefined) return
  throw new SpoolError(
    "usage",
    `${dir} is ${what}; compact archives done/ files only inside the queue root. Nothing more was archived: replace it with a directory (or remove it), or use --delete`,
  )
}

/** `bun run compact`'s options and help. */
export const spec = {
  name: "compact",
  usage:
    "bun run compact --older-than DURATION [--horizon DURATION] [--delete] [--dry-run] [--root DIR] [--ledger URL]",
  summary: "Retention: archives or deletes old done/ files and forgets old ledger history.",
  description:
    "Moves done/ files that reached done/ longer than --older-than ago (their ctime) into\n" +
    "ROOT/archive/YYYY-MM-DD/, the day they reached it (or deletes them with --delete), and forgets\n" +
    "ledger history of that age: duplicate records, replayed and deleted failures, replay and\n" +
    "deletion records, and the origins of broker deliveries that can no longer come back.\n" +
    "Idempotency keys (processed rows) are kept unless --horizon is given: then keys older than the\n" +
    "horizon are pruned, and each order's highest pruned seq is kept so that a later redelivery of a\n" +
    "pruned message goes to error/ as beyond-horizon instead of being applied a second time.\n" +
    "On a PostgreSQL ledger the history and keys of every root sharing it are pruned (deduplication\n" +
    "is the ledger's), the done/ files of this root only. SIGINT/SIGTERM/SIGHUP stop it between two\n" +
    "files, before the ledger is pruned: exit 4, run it again to go on.",
  options: {
    root,
    ledger,
    "older-than": duration("age of done/ files and ledger history to remove, e.g. 90d (required)", {
      example: "90d",
    }),
    horizon: duration("deduplication horizon: prune idempotency keys older than this (>= --older-than)", {
      example: "365d",
    }),
    delete: flag("delete old done/ files instead of archiving them"),
    "dry-run": { ...dryRun, help: "say what would be removed, change nothing" },
  },
  exitCodes: [0, 2, 3, 4],
  examples: [
    { args: "--root /srv/spool/orders --older-than 90d --dry-run", does: "say what 90 days of retention would remove" },
    {
      args: "--root /srv/spool/orders --older-than 90d --horizon 365d",
      does: "archive done/ files older than 90 days, forget keys older than a year",
    },
  ],
} satisfies CommandSpec

/** `bun run compact`: retention for done/ and the ledger. */
export async function main(argv: readonly string[]): Promise<number> {
  // Held from before the arguments are read: a signal at any instant stops the run as documented.
  const stop = holdStopRequest()
  const isStopRequested = () => stop.signal.aborted
  return runCommand(spec, argv, async ({ values: v, quiet }) => {
    const olderThan = v["older-than"]
    if (olderThan === undefined) throw new SpoolError("usage", "--older-than is required, e.g. --older-than 90d")
    const horizon = v.horizon
    if (horizon !== undefined && horizon < olderThan)
      throw new SpoolError("usage", "--horizon must be at least --older-than: keys must outlive the files they protect")
    const url = resolveLedgerUrl(v.ledger)
    const queue = openQueue(resolveRoot(v.root))
    const now = wallClock()
    const cutoff = now - olderThan
    const isDry = v["dry-run"] === true
    // The ledger first: a ledger that cannot be opened (a wrong URL, history whose ledger is
    // gone) fails the run before any done/ file is archived. None is created where there is
    // none yet: it would have nothing to remove, and it would bind a root no consume has run
    // on to SQLite before its first consume could choose PostgreSQL.
    const ledger = await openExistingLedger(queue, { ...(url !== undefined && { url }), isLostLedgerRefused: true })
    try {
      const archive = join(queue.root, "archive")
      const checkedDays = new Set<string>()
      if (!isDry && !v.delete) refuseOutsideRoot(archive)
      let files = 0
      let seen = 0
      for (const e of scanDir(queue.done, 1024)) {
        // Let a signal handler run now and then: each file's move is whole, so a stop between two is clean.
        if (++seen % 256 === 0) await new Promise((r) => setImmediate(r))
        if (isStopRequested()) break
        const path = join(queue.done, e.name)
        let st: fs.Stats
        try {
          st = fs.lstatSync(path)
        } catch {
          continue
        }
        // A file's age here is the time it reached done/, its ctime: the move into done/ sets it
        // (a rename updates the inode's ctime on Linux filesystems) and no one can set it back.
        // Its mtime is the producer's, and a producer may keep an old one (touch -d, cp -p,
        // rsync -t): a message consumed a minute ago would be archived at once. The ledger's
        // commit time is not always there to ask (a duplicate recorded under another name, a
        // file renamed name~1.json on its way in, history an earlier compact pruned, a file put
        // into done/ by hand). Whatever else sets the ctime (a file moved in by hand, restored
        // from a backup, chmod) makes it later: such a file stays longer, never shorter.
        // A directory in done/ is none of spool's (a file is all a consume moves there): left alone.
        if (st.ctimeMs >= cutoff || st.isDirectory()) continue
        files++
        if (isDry) continue
        if (v.delete) {
          fs.unlinkSync(path)
          continue
        }
        const dir = join(archive, new Date(st.ctimeMs).toISOString().slice(0, 10))
        if (!checkedDays.has(dir)) {
          fs.mkdirSync(dir, { recursive: true })
          refuseOutsideRoot(dir)
          checkedDays.add(dir)
        }
        // A name taken in the day's archive gets the same alternative as in done/ and error/,
        // which keeps to the 255-byte name limit.
        for (
          let k = 0;
          renameNoReplace(path, join(dir, k === 0 ? e.name : alternateName(e.name, k))) === "exists";
          k++
        ) {}
      }
      if (isStopRequested()) {
        process.stderr.write(
          `compact: stopped by ${String(stop.signal.reason)} after ${isDry ? "counting" : v.delete ? "deleting" : "archiving"} ${files} done/ file(s), before pruning the ledger; run it again to go on\n`,
        )
        return ExitCode.interrupted
      }
      const iso = (ms: number) => new Date(ms).toISOString()
      const keyCutoff = horizon === undefined ? undefined : iso(now - horizon)
      const summary =
        ledger === undefined
          ? { duplicates: 0, failures: 0, replays: 0, deletions: 0, origins: 0, keys: 0 }
          : await ledger.compact(iso(cutoff), keyCutoff, iso(now), { dryRun: isDry })
      const verb = isDry ? "would remove" : "removed"
      const where = url === undefined ? "" : ` in ${redact(url)} (every root)`
      if (!quiet)
        process.stdout.write(
          `compact: ${verb} ${files} done/ file(s) (${v.delete ? "deleted" : "archived"}), ${summary.duplicates} duplicate record(s), ${summary.failures} replayed failure(s), ${summary.replays} replay record(s), ${summary.deletions} deletion record(s), ${summary.origins} origin record(s), ${summary.keys} idempotency key(s)${where}\n`,
        )
      return ExitCode.ok
    } finally {
      await ledger?.close()
    }
  }).finally(() => stop.release())
}
