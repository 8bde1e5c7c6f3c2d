// The ledger contract: what every ledger must do, written once and run against each backend,
// each opened fresh through openLedger's typed openers on a temp root. A case only one backend can have names
// the feature it needs (see Features), never the backend. PostgreSQL is skipped, with the reason
// printed, where no server answers; under CI, which runs one, its cases fail instead.
// The cases are in ./contract/, in modules named .test.ts so they stay test code (out of the
// package, its build and the production-import scan) that only this file registers.
import { afterAll, describe } from "bun:test"
import { pgUnavailable, tempDatabase, tempQueue } from "@spool/test-support"
import { queuePaths } from "../queue/root.ts"
import { claims } from "./contract/claims.test.ts"
import { commits } from "./contract/commits.test.ts"
import { deferrals } from "./contract/deferrals.test.ts"
import { deletions } from "./contract/deletions.test.ts"
import { failures } from "./contract/failures.test.ts"
import type { LedgerBackend, LedgerUnderTest } from "./contract/fixture.test.ts"
import { landings } from "./contract/landings.test.ts"
import { operator } from "./contract/operator.test.ts"
import { recovery } from "./contract/recovery.test.ts"
import { openPostgresLedger, openSqliteLedger } from "./open.ts"
import type { PostgresLedger } from "./postgres/ledger.ts"
import type { SqliteLedger as Ledger } from "./sqlite/ledger.ts"

/** What one case has open: the ledgers it opened, then the roots (and database) they live in. */
interface Store {
  readonly open: Set<LedgerUnderTest>
  readonly disposers: (() => PromiseLike<void>)[]
}

/** The ledger of the queue root `root` through openLedger's typed openers: SQLite in the root, or PostgreSQL at `url`. */
async function underTest(store: Store, root: string, url: string | undefined): Promise<LedgerUnderTest> {
  const queue = queuePaths(root)
  const l: Ledger | PostgresLedger =
    url === undefined ? openSqliteLedger(queue, { durable: false }) : await openPostgresLedger(queue, { url })
  const access = l.backend === "sqlite" ? sqliteAccess(l) : postgresAccess(l)
  await access.exec("CREATE TABLE IF NOT EXISTS applied (msg_id TEXT NOT NULL)")
  const opened: LedgerUnderTest = {
    ledger: l,
    commit: access.commit,
    rows: access.rows,
    openAgain: () => underTest(store, root, url),
    async openOtherRoot() {
      const q = await tempQueue()
      store.disposers.push(q[Symbol.asyncDispose])
      return underTest(store, q.root, url)
    },
    async [Symbol.asyncDispose]() {
      if (store.open.delete(opened)) await l.close()
    },
  }
  store.open.add(opened)
  return opened
}

type Access = Pick<LedgerUnderTest, "commit" | "rows"> & { exec(statement: string): Promise<void> }

function sqliteAccess(l: Ledger): Access {
  return {
    commit: async (ownerId, outcomes, now, act, policy) =>
      l.commit(
        ownerId,
        outcomes,
        now,
        (o, db) => {
          db.run("INSERT INTO applied (msg_id) VALUES (?)", [o.msgId])
          return act?.(o)
        },
        policy,
      ),
    rows: async (query) => l.db.query(query).all() as Record<string, unknown>[],
    exec: async (statement) => {
      l.db.run(statement)
    },
  }
}

function postgresAccess(l: PostgresLedger): Access {
  return {
    commit: (ownerId, outcomes, now, act, policy) =>
      l.commit(
        ownerId,
        outcomes,
        now,
        async (o, tx) => {
          await tx`INSERT INTO applied (msg_id) VALUES (${o.msgId})`
          return act?.(o)
        },
        policy,
      ),
    rows: async (query) => ((await l.sql.unsafe(query)) as Record<string, unknown>[]).map((r) => ({ ...r })),
    exec: async (statement) => {
      await l.sql.unsafe(statement)
    },
  }
}

/** A fresh root (and database) whose every ledger is closed, then the whole removed, when it is disposed. */
async function fresh(database?: () => Promise<TempDatabase>): Promise<LedgerUnderTest> {
  const store: Store = { open: new Set(), disposers: [] }
  const db = await database?.()
  if (db !== undefined) store.disposers.push(() => db[Symbol.asyncDispose]())
  const dispose = async () => {
    for (const l of [...store.open]) await l[Symbol.asyncDispose]()
    for (const d of store.disposers.splice(0).reverse()) await d()
  }
  try {
    const q = await tempQueue()
    store.disposers.push(q[Symbol.asyncDispose])
    return { ...(await underTest(store, q.root, db?.url)), [Symbol.asyncDispose]: dispose }
  } catch (error) {
    await dispose()
    throw error
  }
}

type TempDatabase = { readonly url: string } & AsyncDisposable

/**
 * A fresh database per case, the next one created while a case runs and each used one dropped
 * in the background: creating and dropping a database take longer than most cases.
 */
class Databases {
  #next: Promise<TempDatabase> | undefined
  readonly #drops: PromiseLike<void>[] = []

  async take(): Promise<TempDatabase> {
    const taken = await (this.#next ?? tempDatabase())
    this.#next = tempDatabase()
    // Awaited by the next take or by close; a failure is that caller's.
    this.#next.catch(() => {})
    return {
      url: taken.url,
      [Symbol.asyncDispose]: async () => {
        this.#drops.push(taken[Symbol.asyncDispose]())
      },
    }
  }

  async close(): Promise<void> {
    const next = this.#next
    this.#next = undefined
    if (next !== undefined) await (await next)[Symbol.asyncDispose]()
    await Promise.all(this.#drops.splice(0))
  }
}

// Under CI pgUnavailable says nothing is missing: its cases then run and fail on a missing server.
const pgMissing = await pgUnavailable()
if (pgMissing !== undefined) console.warn(pgMissing)
const databases = new Databases()

const ledgerBackends: readonly LedgerBackend[] = [
  {
    name: "SQLite",
    features: { sharedAcrossHosts: false, serverClock: false, asyncEffect: false },
    skip: undefined,
    open: () => fresh(),
    finish: async () => {},
  },
  {
    name: "PostgreSQL",
    features: { sharedAcrossHosts: true, serverClock: true, asyncEffect: true },
    skip: pgMissing,
    open: () => fresh(() => databases.take()),
    finish: () => databases.close(),
  },
]

const areas = { claims, commits, recovery, deferrals, deletions, failures, operator, landings }

for (const b of ledgerBackends)
  (b.skip === undefined ? describe : describe.skip)(`the ledger contract on ${b.name}`, () => {
    afterAll(() => b.finish())
    for (const [name, cases] of Object.entries(areas)) describe(name, () => cases(b))
  })
