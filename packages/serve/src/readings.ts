// The console's readings, shared. A reading of a large queue is not cheap (lag's histogram
// lstats every waiting file; the failures page reads every error/ file's history), and the
// console runs beside a consumer on the same cores: were each request to read anew, a dashboard
// and a scrape would take the consumer's CPU, and requests arriving faster than readings finish
// would queue without bound. So a reading answers every request while it is fresh: for at least
// `minAgeMs`, and for `costFactor` times what the latest readings of every key took to make
// together, so that the console spends at most about 1/costFactor of one core reading in all,
// however many kinds of reading are asked and whatever the size of the queue (each key is read
// again at most once per costFactor x total, at its own cost). Once it is stale,
// the next request starts a new one; until that one is finished, requests are answered from the
// last (each page says when it was read), so no request waits on a slow reading but the first.

/** How long a reading answers requests: at least `minAgeMs`, and `costFactor` times the cost of the latest readings of all keys. */
export interface Freshness {
  readonly minAgeMs: number
  readonly costFactor: number
}

/** One second at least, twenty times the readings' cost: readings that take 100 ms in all answer for 2 s. */
export const defaultFreshness: Freshness = { minAgeMs: 1000, costFactor: 20 }

/** Every request reads anew (those that ask while a reading is made share it): for tests that change the queue between requests. */
export const noReuse: Freshness = { minAgeMs: 0, costFactor: 0 }

// The failures page's filter is part of a key: a client could make keys without end.
const maxKeys = 64

interface Finished {
  readonly value: unknown
  /** When it finished (the clock's ms), and how long it took. */
  readonly at: number
  readonly costMs: number
}

interface Entry {
  /** The last reading finished, if any. */
  latest?: Finished
  /** The reading being made, if any. */
  making?: Promise<unknown>
}

/** Readings by key, each made once for the requests that ask while it is made or fresh. */
export class Readings {
  readonly #entries = new Map<string, Entry>()
  readonly #freshness: Freshness
  readonly #now: () => number

  constructor(freshness: Freshness = defaultFreshness, now: () => number = () => performance.now()) {
    this.#freshness = freshness
    this.#now = now
  }

  /** The reading of `key`: a fresh one; else the one being made, or the last while a new one is made. */
  read<T>(key: string, make: () => Promise<T>): Promise<T> {
    const entry = this.#entries.get(key) ?? this.#add(key)
    const { latest } = entry
    if (latest !== undefined && this.#isFresh(latest)) return Promise.resolve(latest.value as T)
    if (entry.making === undefined) {
      entry.making = this.#make(key, entry, make)
      // A request answered from the last reading does not wait for this one: its failure is the next request's.
      entry.making.catch(() => {})
    }
    const making = entry.making
    // Without reuse, a request never gets a reading older than itself.
    const isStaleAllowed = this.#freshness.minAgeMs > 0 || this.#freshness.costFactor > 0
    if (latest !== undefined && isStaleAllowed) return Promise.resolve(latest.value as T)
    return making as Promise<T>
  }

  /** Forgets every reading: after the console changed the queue, its next pages show the change. */
  clear(): void {
    this.#entries.clear()
  }

  #add(key: string): Entry {
    const entry: Entry = {}
    this.#entries.set(key, entry)
    if (this.#entries.size > maxKeys) {
      const oldest = this.#entries.keys().next().value
      if (oldest !== undefined) this.#entries.delete(oldest)
    }
    return entry
  }

  async #make<T>(key: string, entry: Entry, make: () => Promise<T>): Promise<T> {
    const started = this.#now()
    try {
      // Called in a later microtask: a make that throws at once still leaves `making` set first.
      const value = await Promise.resolve().then(make)
      const at = this.#now()
      entry.latest = { value, at, costMs: at - started }
      return value
    } catch (error) {
      // A failed reading is not kept, and the last good one no longer answers: the page says why.
      if (this.#entries.get(key) === entry) this.#entries.delete(key)
      throw error
    } finally {
      delete entry.making
    }
  }

  #isFresh(f: Finished): boolean {
    const { minAgeMs, costFactor } = this.#freshness
    return this.#now() - f.at < Math.max(minAgeMs, costFactor * this.#totalCostMs())
  }

  /** What the latest reading of every key took to make, together (at most maxKeys of them). */
  #totalCostMs(): number {
    let total = 0
    for (const entry of this.#entries.values()) total += entry.latest?.costMs ?? 0
    return total
  }
}
