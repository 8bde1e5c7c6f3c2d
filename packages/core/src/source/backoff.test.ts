import { expect, test } from "bun:test"
import { Backoff } from "./backoff.ts"

test("doubles the wait up to the maximum, and gives up once the outage lasts too long", () => {
  const backoff = new Backoff({ initialDelayMs: 100, maxDelayMs: 1000, giveUpAfterMs: 5000 }, () => 1)
  expect([0, 100, 300, 700, 1500, 2500].map((t) => backoff.next(t))).toEqual([100, 200, 400, 800, 1000, 1000])
  // The last wait ends at the limit, for one more attempt there; after that it gives up.
  expect(backoff.next(4500)).toBe(500)
  expect(backoff.next(5000)).toBeUndefined()
  expect(backoff.elapsed(5000)).toBe(5000)
})

test("waits at least half of each step, and starts over once the broker answered", () => {
  const backoff = new Backoff({ initialDelayMs: 100, maxDelayMs: 1000 }, () => 0)
  expect([backoff.next(0), backoff.next(50), backoff.next(150)]).toEqual([50, 100, 200])
  backoff.reset()
  expect(backoff.elapsed(10_000)).toBe(0)
  expect(backoff.next(10_000)).toBe(50)
})
