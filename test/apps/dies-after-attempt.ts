// A consume run that is SIGKILLed at the first turn of its event loop after recovery counts an
// attempt on a file, as a random kill landing just after the count would. The file is in hand
// from the count to its commit, and nothing in between may wait on anything (a module to
// import, a file to read): on the SQLite ledger the kill then finds the file committed. Used by
// crash.test.ts. Run: bun test/apps/dies-after-attempt.ts ROOT
import { consume, type LedgerPort, openQueue, openSqliteLedger } from "@spool/core/engine"

const queue = openQueue(process.argv[2] as string)
const ledger = openSqliteLedger(queue)
const killedAfterCount = new Proxy(ledger, {
  get(target, key) {
    if (key === "startAttempt")
      return (...args: Parameters<typeof ledger.startAttempt>) => {
        const counted = target.startAttempt(...args)
        setImmediate(() => process.kill(process.pid, "SIGKILL"))
        return counted
      }
    const value = Reflect.get(target, key)
    return typeof value === "function" ? value.bind(target) : value
  },
}) satisfies LedgerPort
await consume({ queue, ledger: killedAfterCount })
