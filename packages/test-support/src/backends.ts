// One queue on either ledger, for the tests that run the same commands against both: the
// arguments and environment that select its ledger, the commands run with them as processes,
// and the rows of that ledger read and written in SQL both backends accept.
import { Database } from "bun:sqlite"
import fs from "node:fs"
import { join } from "node:path"
import { SQL } from "bun"
import { endState, type Snapshot } from "./end-state.ts"
import type { LedgerKind } from "./hostile.ts"
import { pgUnavailable, tempDatabase } from "./postgres.ts"
import { type RunResult, run } from "./process.ts"
import { repoRoot } from "./repo.ts"
import { tempDir, tempQueue } from "./temp.ts"

/** A value bound to a `?` of a statement. */
export type SqlValue = string | number | null

/** The commands that open a queue's ledger. */
export type LedgerCommand =
  | "consume"
  | "setup"
  | "schema"
  | "order-check"
  | "compact"
  | "stats"
  | "verify"
  | "list"
  | "show"
  | "replay"
  | "delete"

/** A temp queue whose ledger is on one backend: ROOT/ledger.db, or a temp PostgreSQL database. */
export interface BackendQueue extends AsyncDisposable {
  readonly backend: LedgerKind
  readonly root: string
  /** The PostgreSQL ledger's URL; undefined on SQLite. */
  readonly url: string | undefined
  /** What selects the ledger on a command line: `--ledger URL` on PostgreSQL, nothing on SQLite. */
  readonly ledgerArgs: readonly string[]
  /** What selects this queue and its ledger on a command line: `--root ROOT`, then `ledgerArgs`. */
  readonly args: readonly string[]
  /** What selects the ledger for a command given no --ledger: SPOOL_LEDGER_URL (empty on SQLite). */
  readonly env: Readonly<Record<string, string>>
  /** Writes a file into inbox/ (raw bytes or a JSON value). */
  put(name: string, content: string | Uint8Array | object): void
  /** Runs one of spool's commands as a process on this queue, with `args` before its own. */
  command(name: LedgerCommand, args?: readonly string[], env?: Record<string, string>): Promise<RunResult>
  /** The rows `query` returns from the ledger; `?` marks each parameter. */
  rows(query: string, params?: readonly SqlValue[]): Promise<Record<string, unknown>[]>
  /** Runs one statement on the ledger; `?` marks each parameter. */
  exec(statement: string, params?: readonly SqlValue[]): Promise<void>
  /** The tables in the ledger (none: no ledger was created). */
  tables(): Promise<string[]>
  /** Inserts a row as this root's: on PostgreSQL, with the root's id in a table that has one. */
  insert(table: string, row: Readonly<Record<string, SqlValue>>): Promise<void>
  /** The queue's end state (see `endState`). */
  snapshot(): Promise<Snapshot>
}

/** A backend the matrix runs on, with why it is skipped here (undefined: it runs). */
export interface Backend {
  readonly name: LedgerKind
  readonly skip: string | undefined
  /** A fresh temp queue on this backend, its inbox seeded as `tempQueue` seeds it. */
  queue(options?: { seed?: "fixtures" | Record<string, string | object> }): Promise<BackendQueue>
}

/** Both backends; PostgreSQL is skipped, with the reason printed, when no server answers. */
export async function ledgerBackends(): Promise<readonly Backend[]> {
  const skip = await pgUnavailable()
  if (skip) console.warn(skip)
  return [
    {
      name: "SQLite",
      skip: undefined,
      async queue(options = {}) {
        const q = await tempQueue(options)
        return backendQueue("SQLite", q.root, undefined, q[Symbol.asyncDispose])
      },
    },
    {
      name: "PostgreSQL",
      skip,
      async queue(options = {}) {
        const db = await tempDatabase()
        const q = await tempQueue(options)
        return backendQueue("PostgreSQL", q.root, db.url, async () => {
          await q[Symbol.asyncDispose]()
          await db[Symbol.asyncDispose]()
        })
      },
    },
  ]
}

/** Fresh copies of a queue that no longer changes, one for each test that changes its own. */
export interface QueueTemplate extends AsyncDisposable {
  /** A copy of the queue and its ledger, disposed of on its own. */
  copy(): Promise<BackendQueue>
}

/** How many disposed copies' databases are dropped together. */
const dropBatch = 8

/**
 * Takes `queue` as the template of its copies; it must not change once the first copy is made.
 * Disposing of the template disposes of `queue`. A copy keeps the root's id and its binding,
 * whose ledger id the copied database holds too. On PostgreSQL a copy's database is a CREATE
 * DATABASE ... TEMPLATE: the next one is made while a test uses the last, and disposed copies'
 * databases are dropped several at once, since each DROP DATABASE waits for a checkpoint and
 * concurrent drops share one.
 */
export function templateOf(queue: BackendQueue): QueueTemplate {
  const { backend, root, url } = queue
  const copyRoot = async () => {
    const dir = await tempDir()
    const copied = join(dir.path, "q")
    fs.cpSync(root, copied, { recursive: true })
    return { dir, copied }
  }
  if (url === undefined)
    return {
      async copy() {
        const { dir, copied } = await copyRoot()
        return backendQueue(backend, copied, undefined, dir[Symbol.asyncDispose])
      },
      [Symbol.asyncDispose]: () => queue[Symbol.asyncDispose](),
    }
  const retired: AsyncDisposable[] = []
  const drops: Promise<unknown>[] = []
  /** Drops the retired databases in the background; returns the batch before, to wait for it. */
  const dropRetired = () => {
    const previous = drops.at(-1)
    const batch = Promise.all(retired.splice(0).map((db) => db[Symbol.asyncDispose]()))
    // A failed drop is reported by the template's disposal, which waits for every batch.
    batch.catch(() => {})
    drops.push(batch)
    return previous
  }
  const prepare = () => {
    const db = tempDatabase({ copyOf: url })
    // Awaited by the copy that takes it, or by the template's disposal.
    db.catch(() => {})
    return db
  }
  let next: ReturnType<typeof prepare> | undefined
  return {
    async copy() {
      // Taken before awaiting, so that copies made at once each get their own.
      const taken = next ?? prepare()
      next = prepare()
      const db = await taken
      const { dir, copied } = await copyRoot()
      return backendQueue(backend, copied, db.url, async () => {
        await dir[Symbol.asyncDispose]()
        retired.push(db)
        // Waiting for the batch before, databases never pile up.
        if (retired.length >= dropBatch) await dropRetired()
      })
    },
    async [Symbol.asyncDispose]() {
      const spare = await next?.catch(() => undefined)
      if (spare) retired.push(spare)
      dropRetired()
      await Promise.all(drops)
      await queue[Symbol.asyncDispose]()
    },
  }
}

const bins: Record<LedgerCommand, string> = {
  consume: "packages/consumer/bin/consume.ts",
  setup: "packages/consumer/bin/setup.ts",
  schema: "packages/consumer/bin/schema.ts",
  "order-check": "packages/consumer/bin/order-check.ts",
  compact: "packages/consumer/bin/compact.ts",
  stats: "packages/consumer/bin/stats.ts",
  verify: "packages/consumer/bin/verify.ts",
  list: "packages/consumer/bin/list.ts",
  show: "packages/consumer/bin/show.ts",
  replay: "scripts/replay.ts",
  delete: "scripts/delete.ts",
}

function backendQueue(
  backend: LedgerKind,
  root: string,
  url: string | undefined,
  dispose: () => PromiseLike<void>,
): BackendQueue {
  const ledgerArgs = url === undefined ? [] : ["--ledger", url]
  const args = ["--root", root, ...ledgerArgs]
  const ledger = url === undefined ? sqliteRows(join(root, "ledger.db")) : postgresRows(url, root)
  return {
    backend,
    root,
    url,
    ledgerArgs,
    args,
    env: { SPOOL_LEDGER_URL: url ?? "" },
    put(name, content) {
      const data = typeof content === "string" || content instanceof Uint8Array ? content : JSON.stringify(content)
      fs.writeFileSync(join(root, "inbox", name), data)
    },
    // The flag alone selects the ledger: none is inherited from the environment.
    command: (name, rest = [], env = {}) =>
      run(["bun", join(repoRoot, bins[name]), ...args, ...rest], { env: { SPOOL_LEDGER_URL: "", ...env } }),
    ...ledger,
    snapshot: () => endState(root, url),
    [Symbol.asyncDispose]: dispose,
  }
}

type LedgerRowsAccess = Pick<BackendQueue, "rows" | "exec" | "insert" | "tables">

function sqliteRows(path: string): LedgerRowsAccess {
  const withDb = <T>(fn: (db: Database) => T, readonly = false): T => {
    const db = new Database(path, { readonly })
    try {
      return fn(db)
    } finally {
      db.close()
    }
  }
  return {
    rows: async (query, params = []) =>
      withDb((db) => db.query(query).all(...params) as Record<string, unknown>[], true),
    exec: async (statement, params = []) => {
      withDb((db) => db.run(statement, [...params]))
    },
    tables: async () =>
      fs.existsSync(path)
        ? withDb(
            (db) =>
              (
                db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as {
                  name: string
                }[]
              ).map((r) => r.name),
            true,
          )
        : [],
    insert: async (table, row) => {
      const columns = Object.keys(row)
      withDb((db) =>
        db.run(`INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`, [
          ...Object.values(row),
        ]),
      )
    },
  }
}

function postgresRows(url: string, root: string): LedgerRowsAccess {
  const withSql = async <T>(fn: (sql: SQL) => Promise<T>): Promise<T> => {
    const sql = new SQL({ url, max: 1 })
    try {
      return await fn(sql)
    } finally {
      await sql.close()
    }
  }
  // `?` to PostgreSQL's `$1`, `$2`, ...: the tests' SQL holds no `?` of its own.
  const numbered = (query: string) => {
    let n = 0
    return query.replaceAll("?", () => `$${++n}`)
  }
  const rows = (query: string, params: readonly SqlValue[] = []) =>
    withSql(async (sql) =>
      ((await sql.unsafe(numbered(query), [...params])) as Record<string, unknown>[]).map((r) => ({ ...r })),
    )
  return {
    rows,
    exec: async (statement, params = []) => {
      await rows(statement, params)
    },
    tables: async () =>
      (await rows("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")).map((r) =>
        String(r.tablename),
      ),
    insert: async (table, row) => {
      const [has] = await rows(
        "SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = ? AND column_name = 'root_id'",
        [table],
      )
      const full =
        has?.n === 1 && !("root_id" in row)
          ? { ...row, root_id: fs.readFileSync(join(root, ".spool-root-id"), "utf8").trim() }
          : row
      const columns = Object.keys(full)
      await rows(`INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`, [
        ...Object.values(full),
      ])
    },
  }
}
