import { describe, expect, it } from "bun:test"
import { SpoolError } from "../../errors.ts"
import { asLedgerError, translateFailures } from "./errors.ts"

const url = "postgres://spool:secret@db.internal:5432/spool"

/** An error shaped as Bun's PostgreSQL client raises it: Bun's code, the server's SQLSTATE in errno. */
function pgError(message: string, errno: string | undefined, code = "ERR_POSTGRES_SERVER_ERROR"): Error {
  return Object.assign(new Error(message), { name: "PostgresError", code, errno })
}

describe("asLedgerError", () => {
  it.each([
    ["canceling statement due to lock timeout", "55P03", undefined, "was locked by another session for more than 2s"],
    [
      "canceling statement due to statement timeout",
      "57014",
      undefined,
      "was cancelled by the server's statement_timeout",
    ],
    ["canceling statement due to user request", "57014", undefined, "was cancelled by the server (canceling"],
    ["terminating connection due to administrator command", "57P01", undefined, "was closed (terminating"],
    ["the database system is shutting down", "57P03", undefined, "was closed"],
    ["connection failure", "08006", undefined, "was closed"],
    ["Connection closed", undefined, "ERR_POSTGRES_CONNECTION_CLOSED", "was closed"],
    ["Failed to connect", undefined, "ERR_POSTGRES_CONNECTION_REFUSED", "cannot reach the PostgreSQL ledger"],
    ["could not extend file: No space left on device", "53100", undefined, "is out of resources"],
    ['database "spool" does not exist', "3D000", undefined, "names a database the server does not have"],
    ['role "spool" does not exist', "28000", undefined, "refused the login of the ledger"],
    ['password authentication failed for user "spool"', "28P01", undefined, "create the role (createuser NAME"],
    // A server error whose text mentions a timeout or a connection is not an unreachable server.
    ['duplicate key value violates unique constraint "timeout_connection"', "23505", undefined, "PostgreSQL ledger"],
  ])("turns %p (%p %p) into a ledger error that says %p", (message, errno, code, says) => {
    const e = asLedgerError(pgError(message, errno, code), url, 2000)
    expect(e).toBeInstanceOf(SpoolError)
    expect((e as SpoolError).code).toBe("ledger")
    expect((e as SpoolError).message).toContain(says)
    expect((e as SpoolError).message).toContain("postgres://spool:***@db.internal:5432/spool")
    expect((e as SpoolError).message).not.toContain("secret")
    if (errno !== "55P03" && code !== "ERR_POSTGRES_CONNECTION_REFUSED")
      expect((e as SpoolError).message).not.toContain("cannot reach")
  })

  it("leaves a SpoolError as it is", () => {
    const e = new SpoolError("refused", "no")
    expect(asLedgerError(e, url)).toBe(e)
  })
})

describe("translateFailures", () => {
  class Source {
    constructor(readonly tag: string) {}
    async rejects(): Promise<void> {
      throw pgError("terminating connection due to administrator command", "57P01")
    }
    throws(): void {
      throw pgError("canceling statement due to lock timeout", "55P03")
    }
    async *pages(): AsyncGenerator<number> {
      yield 1
      throw pgError("terminating connection due to administrator command", "57P01")
    }
    async works(): Promise<string> {
      return this.tag
    }
  }
  translateFailures(Source, (self: Source, error) => new SpoolError("ledger", `${self.tag}: ${String(error)}`))
  const s = new Source("ledger-a")

  it("translates a rejection, a throw and an async iterator's failure, with the instance at hand", async () => {
    await expect(s.rejects()).rejects.toThrow("ledger-a: PostgresError: terminating connection")
    expect(() => s.throws()).toThrow("ledger-a: PostgresError: canceling statement due to lock timeout")
    const seen: number[] = []
    const reading = (async () => {
      for await (const n of s.pages()) seen.push(n)
    })()
    await expect(reading).rejects.toThrow("ledger-a: PostgresError: terminating connection")
    expect(seen).toEqual([1])
  })

  it("leaves what succeeds as it is", async () => {
    expect(await s.works()).toBe("ledger-a")
  })
})
