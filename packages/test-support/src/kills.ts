// Random SIGKILLs of the real consume process, round after round, each kill observed (what it
// left is kill-observations.ts's), then a last run to the end.
import fs from "node:fs"
import { SQL } from "bun"
import { mtimes, startConsume } from "./consumers.ts"
import { type KillObservation, observe, queued } from "./kill-observations.ts"

/** What a random-kill run did. */
export interface KillRun {
  readonly kills: KillObservation[]
  /** Runs started, the final one included. */
  readonly starts: number
  readonly stderr: string[]
}

/**
 * Runs consume on `root` again and again, SIGKILLing each run at a random point, until a round
 * ends with an empty inbox/ or the kill budget (count or time) is spent; then one more run to
 * completion, which must exit 0. With `consumers` > 1, each round starts that many processes at
 * once, each with its own kill time. Start-up time varies a lot on a loaded machine, so most
 * kills are timed from the moment the round starts changing the queue (inbox/ or processing/
 * changes its mtime; polled every 10 ms): a random delay in [0, activeMs). One kill in five is
 * timed from the spawn instead, to land in start-up and recovery. A run still going when a
 * quarter of the queue has left inbox/ in its round (or inbox/ is empty) is killed then, whatever
 * its delay: the reference run that `activeMs` comes from may have been slowed by the machine's
 * load, and rounds that drained the queue unharmed would leave the test without its kills; for
 * that reason too, with one consumer, a round that took more than an eighth of the queue shortens
 * the window to the rate it showed. The budget's time ends
 * the kills only once `minKills` are taken: a loaded machine slows every round, and a test that
 * asks for kills must get them whatever its speed. A run that ends on its own must exit 0 and
 * never report a locked ledger.
 */
export async function consumeWithRandomKills(
  root: string,
  options: {
    readonly random: () => number
    readonly args?: readonly string[]
    readonly maxKills: number
    /** Kills taken whatever the time budget says, unless the queue drains first. */
    readonly minKills?: number
    readonly budgetMs: number
    readonly activeMs: number
    readonly consumers?: number
    /** The root's PostgreSQL ledger; passed to every run as --ledger. */
    readonly ledgerUrl?: string
    /** Environment for every run (a test hook such as SPOOL_CRASH_ON). */
    readonly env?: Record<string, string>
    /** What runs (see startConsume): the consume command unless an application is given. */
    readonly bin?: string
  },
): Promise<KillRun> {
  const args = [...(options.args ?? []), ...(options.ledgerUrl === undefined ? [] : ["--ledger", options.ledgerUrl])]
  const kills: KillObservation[] = []
  const stderr: string[] = []
  const started = performance.now()
  let starts = 0
  let startupMs = 500
  let activeMs = options.activeMs
  const total = queued(root)
  // Kills of one round are taken one at a time, each with its observation.
  let turn: Promise<unknown> = Promise.resolve()
  const inTurn = <T>(f: () => Promise<T>): Promise<T> => {
    const next = turn.then(f)
    turn = next.catch(() => {})
    return next
  }
  const isWithinBudget = () => kills.length < (options.minKills ?? 0) || performance.now() - started < options.budgetMs
  while (kills.length < options.maxKills && isWithinBudget()) {
    const before = mtimes(root)
    const queuedBefore = queued(root)
    const spawnedAt = performance.now()
    const round = Array.from({ length: options.consumers ?? 1 }, () => {
      const fromSpawn = options.random() < 0.2
      const delayMs = Math.round(options.random() * (fromSpawn ? startupMs * 1.5 : activeMs))
      const c = startConsume(root, args, options.env, options.bin)
      let hasExited = false
      void c.finished.then(() => {
        hasExited = true
      })
      return { c, fromSpawn, delayMs, hasExited: () => hasExited }
    })
    starts += round.length
    const allExited = () => round.every((p) => p.hasExited())
    // When the round's last kill was sent: its work is measured up to there, not to the end of
    // the kill's observation (on PostgreSQL, waiting for the victim's sessions to end).
    let killedAt = spawnedAt
    const activity = (async () => {
      for (const deadline = performance.now() + 60_000; performance.now() < deadline && !allExited(); ) {
        await Bun.sleep(10)
        if (mtimes(root) !== before) return performance.now()
      }
      return undefined
    })()
    await Promise.all(
      round.map(async (p) => {
        const from = p.fromSpawn ? spawnedAt : await activity
        if (from !== undefined) {
          let timer: Timer | undefined
          const wait = Math.max(0, from + p.delayMs - performance.now())
          // Never more than a quarter of the queue in one round, whatever the window says.
          const drained = untilInboxAtMost(root, Math.max(0, queuedBefore - Math.ceil(total / 4)), p.hasExited)
          await Promise.race([
            p.c.finished,
            drained.promise,
            new Promise((resolve) => (timer = setTimeout(resolve, wait))),
          ])
          clearTimeout(timer)
          drained.stop()
        }
        killedAt = Math.max(killedAt, performance.now())
        const r = await inTurn(() =>
          killAndObserve(p, round, options.ledgerUrl, async (pid) => {
            kills.push(await observe(root, Math.round(performance.now() - spawnedAt), pid, options.ledgerUrl))
          }),
        )
        if (r.signalCode === "SIGKILL") {
          // killAndObserve recorded what the kill left
        } else if (r.exitCode !== 0 || /database is locked/i.test(r.stderr))
          throw new Error(`consume exited ${r.exitCode} between kills:\n${r.stderr}`)
        else stderr.push(r.stderr)
      }),
    )
    const activeAt = await activity
    if (activeAt !== undefined) startupMs = activeAt - spawnedAt
    const left = queued(root)
    if (left === 0) break
    if ((options.consumers ?? 1) === 1 && activeAt !== undefined && queuedBefore - left > total / 8) {
      const msPerMessage = Math.max(1, killedAt - activeAt) / (queuedBefore - left)
      activeMs = Math.max(50, Math.min(activeMs, (msPerMessage * total) / 8))
    }
  }
  // The last run goes to its end; only a crash hook in `env` can kill it (a file that crashes
  // every consumer that reads it), and then the next one goes on until the file is poison.
  for (let i = 0; ; i++) {
    starts++
    const spawnedAt = performance.now()
    const c = startConsume(root, args, options.env, options.bin)
    const r = await c.finished
    if (r.exitCode === 0) {
      stderr.push(r.stderr)
      break
    }
    if (r.signalCode !== "SIGKILL" || options.env === undefined || i >= 20)
      throw new Error(`consume --root ${root} ${args.join(" ")} exited ${r.exitCode ?? r.signalCode}:\n${r.stderr}`)
    kills.push(await observe(root, Math.round(performance.now() - spawnedAt), c.proc.pid, options.ledgerUrl))
  }
  return { kills, starts, stderr }
}

interface RoundMember {
  readonly c: ReturnType<typeof startConsume>
  readonly hasExited: () => boolean
}

/**
 * SIGKILLs `victim` (unless it has exited already) and, when it died of a SIGKILL (this one or
 * its own crash hook's), lets `record` read what it left, with the round's other consumers
 * stopped (SIGSTOP) from just before the kill until `record` is done: a sibling that saw the owner die and adopted its claims first
 * would hide which files the kill caught in hand, and the harness would then not expect a file
 * those kills made poison. On PostgreSQL it also waits until the victim's server sessions have
 * ended, so a COMMIT it sent before dying is in what `record` reads.
 */
async function killAndObserve(
  victim: RoundMember,
  round: readonly RoundMember[],
  ledgerUrl: string | undefined,
  record: (pid: number) => Promise<void>,
) {
  const others = round.filter((q) => q !== victim && !q.hasExited())
  const alive = !victim.hasExited()
  for (const q of alive ? [victim, ...others] : others) signal(q, "SIGSTOP")
  try {
    // A consumer that killed itself (a crash hook) is observed as well, as soon as it is seen.
    const ports = alive && ledgerUrl !== undefined ? tcpPorts(victim.c.proc.pid) : []
    if (alive) signal(victim, "SIGKILL")
    const r = await victim.c.finished
    if (r.signalCode === "SIGKILL") {
      if (ledgerUrl !== undefined) await statementsSettled(ledgerUrl, ports)
      await record(victim.c.proc.pid)
    }
    return r
  } finally {
    for (const q of others) signal(q, "SIGCONT")
  }
}

function signal(p: RoundMember, sig: NodeJS.Signals) {
  try {
    p.c.proc.kill(sig)
  } catch {
    // it has exited: nothing to stop or resume
  }
}

/** The local TCP ports of process `pid`'s sockets (its PostgreSQL sessions among them), from /proc. */
export function tcpPorts(pid: number): number[] {
  const inodes = new Set<string>()
  try {
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      try {
        const inode = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1]
        if (inode !== undefined) inodes.add(inode)
      } catch {
        // closed while listed
      }
    }
  } catch {
    return [] // it has exited
  }
  const ports: number[] = []
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = ""
    try {
      text = fs.readFileSync(table, "utf8")
    } catch {
      continue
    }
    for (const line of text.split("\n").slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const [, local = "", , , , , , , , inode = ""] = line.trim().split(/\s+/)
      if (inodes.has(inode)) ports.push(Number.parseInt(local.split(":")[1] ?? "", 16))
    }
  }
  return ports
}

/**
 * Waits (at most 5 s) until every server session whose client ports are `ports` has ended, but
 * for one waiting for a lock. The client is dead, so each ends once its backend reads the end of
 * the socket, after what the client wrote before dying: a COMMIT among it commits. An idle session
 * is no proof (its backend may not yet have read a COMMIT in its socket). A lock waiter is held by
 * a stopped sibling, changes only what the sibling has not committed, and waiting for it would run
 * out the sibling's lock_timeout.
 */
async function statementsSettled(ledgerUrl: string, ports: readonly number[]) {
  if (ports.length === 0) return
  const sql = new SQL({ url: ledgerUrl, max: 1 })
  try {
    for (const deadline = performance.now() + 5_000; performance.now() < deadline; await Bun.sleep(5)) {
      const [row] = await sql.unsafe(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND client_port IN (${ports.join(",")}) AND wait_event_type IS DISTINCT FROM 'Lock'`,
      )
      if (row.n === 0) return
    }
  } finally {
    await sql.close()
  }
}

/** Resolves once inbox/ is empty (polled every 10 ms) while `hasExited` is false; `stop` ends the polling. */
function untilInboxAtMost(root: string, most: number, hasExited: () => boolean) {
  let stopped = false
  const promise = (async () => {
    while (!stopped && !hasExited()) {
      await Bun.sleep(10)
      if (queued(root) <= most) return
    }
    await new Promise(() => {}) // never: the other racers decide
  })()
  return {
    promise,
    stop: () => {
      stopped = true
    },
  }
}
