// Several consumers on one root, SIGKILLed at random, at the settings a user gets (the default
// --max-attempts above all): the end state must be the one a single uninterrupted run reaches,
// on both ledgers. Only which delivery of a redelivered msg_id commits first may differ.
import { describe, expect, it } from "bun:test"
import { join } from "node:path"
import { pgUnavailable, tempDatabase } from "../packages/core/src/_pg-testing.ts"
import {
  consumeWithRandomKills,
  diffIgnoringWinners,
  generateMessages,
  makeQueueFrom,
  rng,
  summarizeKills,
  timeConsume,
} from "./_chaos.ts"
import { endState, tempDir } from "./support.ts"

const pgSkip = await pgUnavailable()
if (pgSkip) console.warn(pgSkip)

/** A ledger for one root: SQLite in the root, or a fresh PostgreSQL database. */
interface Backend {
  readonly name: string
  readonly skip: string | undefined
  ledger(): Promise<{ url: string | undefined } & AsyncDisposable>
}

const backends: Backend[] = [
  { name: "SQLite", skip: undefined, ledger: async () => ({ url: undefined, async [Symbol.asyncDispose]() {} }) },
  { name: "PostgreSQL", skip: pgSkip, ledger: tempDatabase },
]

for (const backend of backends)
  (backend.skip ? describe.skip : describe)(`random kills of several consumers at once, ${backend.name} ledger`, () => {
    /**
     * Generates `messages`, runs one copy once uninterrupted and another under rounds of
     * `consumers` processes killed at random, and returns both end states and the kills.
     */
    async function storm(o: { messages: number; seed: number; args: string[]; consumers: number; maxKills: number }) {
      await using t = await tempDir()
      await using refLedger = await backend.ledger()
      await using killedLedger = await backend.ledger()
      generateMessages(join(t.path, "src"), o.messages, o.seed)
      const ref = join(t.path, "ref")
      const killed = join(t.path, "killed")
      makeQueueFrom(join(t.path, "src"), ref)
      makeQueueFrom(join(t.path, "src"), killed)
      const reference = await timeConsume(ref, [
        ...o.args,
        ...(refLedger.url === undefined ? [] : ["--ledger", refLedger.url]),
      ])
      const run = await consumeWithRandomKills(killed, {
        random: rng(o.seed),
        args: o.args,
        maxKills: o.maxKills,
        budgetMs: 40_000,
        // Several consumers drain the queue faster than the one the reference ran.
        activeMs: Math.max(50, reference.activeMs * 0.4),
        consumers: o.consumers,
        ...(killedLedger.url !== undefined && { ledgerUrl: killedLedger.url }),
      })
      return {
        expected: await endState(ref, refLedger.url),
        actual: await endState(killed, killedLedger.url),
        kills: summarizeKills(run.kills),
      }
    }

    it("three consumers in batches of 25, default --max-attempts: the state of one clean run", async () => {
      const { expected, actual, kills } = await storm({
        messages: 6000,
        seed: 14,
        args: ["--batch-size", "25"],
        consumers: 3,
        maxKills: 24,
      })
      expect(diffIgnoringWinners(expected, actual)).toEqual([])
      expect(actual.failures).toEqual(expected.failures)
      expect(kills.kills).toBeGreaterThanOrEqual(6)
      expect(kills.inFlight + kills.committedNotMoved).toBeGreaterThanOrEqual(1)
    }, 120_000)

    it("three consumers with no options at all: the state of one clean run", async () => {
      const { expected, actual, kills } = await storm({
        messages: 5000,
        seed: 15,
        args: [],
        consumers: 3,
        maxKills: 12,
      })
      expect(diffIgnoringWinners(expected, actual)).toEqual([])
      expect(actual.failures).toEqual(expected.failures)
      expect(kills.kills).toBeGreaterThanOrEqual(3)
    }, 120_000)
  })
