// Test support for the PostgreSQL ledger: a throwaway database per test on the server named
// by SPOOL_TEST_PG_URL (default: the local one, trust auth, database `test`).
import { SQL } from "bun"
import { isCi } from "./tools.ts"

export const adminUrl = process.env.SPOOL_TEST_PG_URL || "postgres://postgres@127.0.0.1:5432/test"

/**
 * Why PostgreSQL tests cannot run here, or undefined when they can. Under CI, which runs a
 * server, it is always undefined: the tests then run and fail on the missing server, with the
 * reason printed, instead of being skipped.
 */
export async function pgUnavailable(): Promise<string | undefined> {
  const sql = new SQL({ url: adminUrl, max: 1, connectionTimeout: 3 })
  try {
    await sql`SELECT 1`
    return undefined
  } catch (error) {
    if (isCi()) {
      console.error(`no PostgreSQL server at ${adminUrl}: CI is set, so the PostgreSQL tests run and fail`)
      return undefined
    }
    return `PostgreSQL tests skipped: no server at ${adminUrl} (${error instanceof Error ? error.message : String(error)}). They need a PostgreSQL server; set SPOOL_TEST_PG_URL to one where the user may CREATE DATABASE.`
  } finally {
    await sql.close().catch(() => {})
  }
}

/**
 * A fresh database, dropped (with any connection left to it) when disposed; with `copyOf`, a
 * copy of that temp database (which nothing may be connected to meanwhile).
 */
export async function tempDatabase(options: { copyOf?: string } = {}): Promise<{ url: string } & AsyncDisposable> {
  const name = `spool_t_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`
  const admin = new SQL({ url: adminUrl, max: 1 })
  const template = options.copyOf === undefined ? "" : ` TEMPLATE ${new URL(options.copyOf).pathname.slice(1)}`
  await admin.unsafe(`CREATE DATABASE ${name}${template}`)
  const u = new URL(adminUrl)
  u.pathname = `/${name}`
  return {
    url: u.toString(),
    async [Symbol.asyncDispose]() {
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await admin.close()
    },
  }
}
