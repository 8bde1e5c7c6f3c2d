// The options of `bun run bench` and its --help.
import { parseArgs } from "node:util"

const usage = [
  "usage: bun run bench [--messages N] [--runs R] [--million] [--cold] [--consumers K] [--only LIST] [--watch-seconds S] [--watch-rates LIST] [--keep]",
  "  --messages N    queue size (default 100000)",
  "  --million       queue size 1000000",
  "  --runs R        runs per contender; the table shows medians (default 3)",
  "  --cold          drop the queue's files from the page cache before each run, so every",
  "                  read goes to the disk (files that sat in inbox/ a while; untimed)",
  "  --consumers K   also run K consume processes at once on one root (scaling)",
  "  --only LIST     comma-separated subset of consume,consume-1t,floor,floor-2t,renames,",
  "                  renames-2t,baseline,baseline-wal,watch,consume-pg (default all but",
  "                  consume-pg). consume-1t is consume --one-thread (what the second thread",
  "                  gains); floor is the raw C floor on one thread, floor-2t the same work",
  "                  pipelined over two (claim renames and reads on one, parse, commit and",
  "                  moves on the other); renames is each message's two renames and nothing",
  "                  else (no read, ledger or fsync: what the kernel serialises), renames-2t",
  "                  the same with claims and moves on two threads; baseline keeps SQLite's default",
  "                  settings (rollback journal), baseline-wal is the same loop with WAL;",
  "                  consume-pg runs consume against a fresh PostgreSQL database on",
  "                  $SPOOL_TEST_PG_URL, default the local server (the two backends); with",
  "                  --consumers K also K processes on one root on PostgreSQL (consume-pg-xK);",
  "                  consume-served is consume while spool serve on the same root answers",
  "                  50 requests/s (overview, /metrics, /api/overview, failures) for the drain",
  "                  consume-amqp, consume-nats, consume-redis, consume-mqtt: consume --source",
  "                  from a fresh RabbitMQ queue, JetStream stream, Redis stream or MQTT session",
  "                  of the same messages, each beside its raw client loop (amqp-raw, nats-raw,",
  "                  redis-raw, mqtt-raw: receive and ack only, the transport's floor); they need",
  "                  the brokers on 127.0.0.1 (5672 guest/guest, 4222 with -js, 6379) and, for",
  "                  MQTT, mosquitto on PATH (run privately)",
  "  --watch-seconds S  how long to feed consume --watch at each rate (default 10)",
  "  --watch-rates LIST  messages/s to feed consume --watch at, comma-separated (default 1000,5000)",
  "  --keep          keep the generated data (path printed)",
  "",
].join("\n")

export interface BenchOptions {
  /** Queue size. */
  readonly messages: number
  readonly runs: number
  /** Consume processes run at once on one root besides the single one; 1 runs none. */
  readonly consumers: number
  readonly watchSeconds: number
  /** The rates (messages/s) at which watch latency is measured. */
  readonly watchRates: readonly number[]
  /** The contenders (and `watch`) to run. */
  readonly only: ReadonlySet<string>
  readonly keep: boolean
  /** Drop the queue's file pages from memory before each run. */
  readonly cold: boolean
}

/** The options from `args`; prints the usage and exits on --help. */
export function parseOptions(args: string[]): BenchOptions {
  const { values: v } = parseArgs({
    args,
    options: {
      messages: { type: "string" },
      runs: { type: "string" },
      million: { type: "boolean" },
      consumers: { type: "string" },
      only: { type: "string" },
      keep: { type: "boolean" },
      cold: { type: "boolean" },
      "watch-seconds": { type: "string" },
      "watch-rates": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  })
  if (v.help) {
    process.stdout.write(usage)
    process.exit(0)
  }
  const messages = v.million ? 1_000_000 : Number(v.messages ?? 100_000)
  const runs = Number(v.runs ?? 3)
  const consumers = Number(v.consumers ?? 1)
  const only = new Set(
    (v.only ?? "consume,consume-1t,floor,floor-2t,renames,renames-2t,baseline,baseline-wal,watch").split(","),
  )
  // A broker's consume figure means something beside its transport's floor: one brings the other.
  if (only.has("consume-amqp")) only.add("amqp-raw")
  if (only.has("consume-nats")) only.add("nats-raw")
  if (only.has("consume-mqtt")) only.add("mqtt-raw")
  if (only.has("consume-redis")) only.add("redis-raw")
  const watchRates = (v["watch-rates"] ?? "1000,5000").split(",").map(Number)
  if (watchRates.some((r) => !Number.isInteger(r) || r < 1))
    throw new Error("--watch-rates takes positive integers, comma-separated")
  if (
    !Number.isInteger(messages) ||
    messages < 1 ||
    !Number.isInteger(runs) ||
    runs < 1 ||
    !Number.isInteger(consumers)
  )
    throw new Error("--messages, --runs and --consumers take positive integers")
  return {
    messages,
    runs,
    consumers,
    watchSeconds: Number(v["watch-seconds"] ?? 10),
    watchRates,
    only,
    keep: v.keep === true,
    cold: v.cold === true,
  }
}
