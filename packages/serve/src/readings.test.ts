import { describe, expect, it } from "bun:test"
import { Readings } from "./readings.ts"

/** Readings on a clock the test moves, and a reading that takes `costMs` of it and counts its calls. */
function setUp(freshness = { minAgeMs: 1000, costFactor: 20 }) {
  let now = 0
  const readings = new Readings(freshness, () => now)
  let made = 0
  const make = (costMs: number) => async () => {
    made++
    now += costMs
    return made
  }
  return {
    readings,
    make,
    made: () => made,
    advance: (ms: number) => {
      now += ms
    },
  }
}

describe("the console's shared readings", () => {
  it("gives the requests that ask while a reading is made that same reading", async () => {
    const { readings, made } = setUp()
    let finish: (n: number) => void = () => {}
    const slow = () => new Promise<number>((resolve) => (finish = resolve))
    const [a, b] = [readings.read("k", slow), readings.read("k", slow)]
    await Bun.sleep(0)
    finish(7)
    expect([await a, await b, made()]).toEqual([7, 7, 0])
  })

  it("answers from a reading for its minimum age; once stale, from it while the next is made", async () => {
    const t = setUp()
    expect(await t.readings.read("k", t.make(10))).toBe(1)
    t.advance(999)
    expect([await t.readings.read("k", t.make(10)), t.made()]).toEqual([1, 1])
    t.advance(1)
    expect([await t.readings.read("k", t.make(10)), t.made()]).toEqual([1, 2])
    await Bun.sleep(0)
    expect([await t.readings.read("k", t.make(10)), t.made()]).toEqual([2, 2])
  })

  it("keeps a costly reading for its cost times the factor", async () => {
    const t = setUp()
    expect(await t.readings.read("k", t.make(500))).toBe(1)
    t.advance(9_999)
    expect([await t.readings.read("k", t.make(500)), t.made()]).toEqual([1, 1])
    t.advance(1)
    await t.readings.read("k", t.make(500))
    expect(t.made()).toBe(2)
  })

  it("keeps every reading for the factor times the cost of the latest readings of all keys together", async () => {
    const t = setUp()
    await t.readings.read("overview", t.make(300))
    await t.readings.read("failures", t.make(200))
    // 20 x (300 + 200) ms: each key is read again at most every 10 s, so reading costs at most
    // 1/20 of a core in all; the overview alone would have been read again after 6 s.
    t.advance(9_799)
    expect([await t.readings.read("overview", t.make(300)), t.made()]).toEqual([1, 2])
    expect([await t.readings.read("failures", t.make(200)), t.made()]).toEqual([2, 2])
    t.advance(1)
    await t.readings.read("overview", t.make(300))
    expect(t.made()).toBe(3)
  })

  it("starts one new reading for all the requests that find the last one stale", async () => {
    const t = setUp()
    await t.readings.read("k", t.make(1))
    t.advance(1000)
    await Promise.all([1, 2, 3].map(() => t.readings.read("k", t.make(1))))
    expect(t.made()).toBe(2)
  })

  it("keeps each key apart, and forgets them all when cleared", async () => {
    const t = setUp()
    expect([await t.readings.read("a", t.make(1)), await t.readings.read("b", t.make(1))]).toEqual([1, 2])
    t.readings.clear()
    expect(await t.readings.read("a", t.make(1))).toBe(3)
  })

  it("keeps no failed reading, and answers from none after a failure", async () => {
    const t = setUp()
    await expect(t.readings.read("k", () => Promise.reject(new Error("locked")))).rejects.toThrow("locked")
    expect(await t.readings.read("k", t.make(1))).toBe(1)
    t.advance(1000)
    const failing = () => {
      throw new Error("gone")
    }
    expect(await t.readings.read("k", failing)).toBe(1)
    await Bun.sleep(0)
    await expect(t.readings.read("k", failing)).rejects.toThrow("gone")
  })

  it("reads anew every time without reuse", async () => {
    const t = setUp({ minAgeMs: 0, costFactor: 0 })
    expect([await t.readings.read("k", t.make(5)), await t.readings.read("k", t.make(5))]).toEqual([1, 2])
  })
})
