import { describe, expect, it } from "bun:test"
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { createQueue, type Queue, SpoolError } from "@spool/core"
import {
  bucketOf,
  formatHistogram,
  formatJson,
  formatLine,
  formatLongLine,
  formatPlugin,
  formatPrometheus,
  isAlert,
  isPluginMode,
  isStalled,
  judgePlugin,
  type LagReport,
  lagViolations,
  measureLag,
  type PluginLimits,
  parseRange,
  parseThreshold,
} from "./lag.ts"

interface TempQueue extends AsyncDisposable {
  readonly queue: Queue
}

async function tempQueue(): Promise<TempQueue> {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "spool-lag-"))
  return {
    queue: createQueue(join(dir, "q")),
    async [Symbol.asyncDispose]() {
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

const report = (over: Partial<LagReport> = {}): LagReport => ({
  root: "/srv/spool",
  deferred: 0,
  inbox: 3,
  processing: 1,
  error: 2,
  done: 18,
  oldestInboxAgeSeconds: 12.3456,
  oldestProcessingAgeSeconds: 0.5,
  ignored: 1,
  idleSeconds: 40.25,
  ...over,
})

/**
 * The Prometheus text exposition format, as node_exporter's parser checks it: HELP and TYPE
 * once per metric and before its samples, valid names and label syntax, numeric values, no
 * duplicate series, a final newline. Returns the samples as "name{labels}" -> value.
 */
function parseExposition(text: string): Map<string, number> {
  if (!text.endsWith("\n")) throw new Error("does not end with a newline")
  const samples = new Map<string, number>()
  const typed = new Map<string, string>()
  const helped = new Set<string>()
  const sampled = new Set<string>()
  const name = "[a-zA-Z_:][a-zA-Z0-9_:]*"
  const label = `[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"`
  const sample = new RegExp(`^(${name})(\\{${label}(?:,${label})*\\})? (\\S+)$`)
  for (const line of text.slice(0, -1).split("\n")) {
    const meta = /^# (HELP|TYPE) (\S+) (.+)$/.exec(line)
    if (meta) {
      const [, kind, metric = "", rest = ""] = meta
      if (sampled.has(metric)) throw new Error(`${kind} for ${metric} after its samples`)
      if (kind === "TYPE") {
        if (typed.has(metric)) throw new Error(`second TYPE for ${metric}`)
        if (!["counter", "gauge", "histogram", "summary", "untyped"].includes(rest)) throw new Error(`bad type ${rest}`)
        typed.set(metric, rest)
      } else {
        if (helped.has(metric)) throw new Error(`second HELP for ${metric}`)
        helped.add(metric)
      }
      continue
    }
    const m = sample.exec(line)
    if (!m) throw new Error(`not a valid sample line: ${JSON.stringify(line)}`)
    const [, metric = "", labels = "", value = ""] = m
    if (!typed.has(metric)) throw new Error(`sample of ${metric} without TYPE`)
    if (!/^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]Inf|NaN)$/.test(value))
      throw new Error(`bad value ${value}`)
    const key = `${metric}${labels}`
    if (samples.has(key)) throw new Error(`duplicate series ${key}`)
    sampled.add(metric)
    samples.set(key, Number(value))
  }
  return samples
}

describe("parseThreshold", () => {
  it.each([
    ["0", 0],
    ["10", 10],
    ["007", 7],
  ])("reads %p as %p", (text, n) => {
    expect(parseThreshold(text)).toBe(n)
  })

  it.each([undefined, "", "1.5", "1e3", "abc", " 5", "+5", "-1", "0x10", "99999999999999999999"])(
    "rejects %p as a usage error",
    (text) => {
      expect(() => parseThreshold(text)).toThrow(SpoolError)
      try {
        parseThreshold(text)
      } catch (error) {
        expect((error as SpoolError).code).toBe("usage")
      }
    },
  )
})

describe("measureLag", () => {
  it("counts only the regular files directly in each directory", async () => {
    await using t = await tempQueue()
    const q = t.queue
    for (const n of ["a.json", "b.json", "c.txt", ".d.json", "e.json.part"]) fs.writeFileSync(join(q.inbox, n), "{}")
    fs.mkdirSync(join(q.inbox, "sub.json"))
    fs.writeFileSync(join(q.inbox, "sub.json", "nested.json"), "{}")
    fs.symlinkSync(join(q.done), join(q.inbox, "link.json"))
    fs.symlinkSync("/nonexistent", join(q.inbox, "dangling.json"))
    Bun.spawnSync(["mkfifo", join(q.inbox, "fifo.json")])
    fs.writeFileSync(join(q.processing, "p.json"), "{}")
    fs.writeFileSync(join(q.error, "e1.json"), "x")
    fs.writeFileSync(join(q.error, "e2.json"), "y")
    for (let i = 0; i < 5; i++) fs.writeFileSync(join(q.done, `d${i}.json`), "{}")

    const quick = measureLag(q, "counts")
    expect([quick.inbox, quick.processing, quick.error, quick.ignored]).toEqual([2, 1, 2, 3])
    const full = measureLag(q, "full")
    expect([full.inbox, full.processing, full.error, full.done, full.ignored]).toEqual([2, 1, 2, 5, 3])
  })

  it("dates inbox/ files from when they were written and processing/ files from when they were claimed", async () => {
    await using t = await tempQueue()
    const q = t.queue
    const written = new Date(Date.now() - 600_000)
    fs.writeFileSync(join(q.inbox, "claimed.json"), "{}")
    fs.utimesSync(join(q.inbox, "claimed.json"), written, written)
    fs.renameSync(join(q.inbox, "claimed.json"), join(q.processing, "claimed.json"))
    fs.writeFileSync(join(q.inbox, "waiting.json"), "{}")
    fs.utimesSync(join(q.inbox, "waiting.json"), written, written)

    const r = measureLag(q, "ages")
    expect(r.oldestInboxAgeSeconds).toBeGreaterThanOrEqual(600)
    // Written ten minutes ago but claimed just now: the rename set its ctime.
    expect(r.oldestProcessingAgeSeconds).toBeLessThan(60)
  })

  it("reports the age of the oldest inbox file, and 0 for an empty directory", async () => {
    await using t = await tempQueue()
    const q = t.queue
    const now = Date.now()
    fs.writeFileSync(join(q.inbox, "new.json"), "{}")
    fs.writeFileSync(join(q.inbox, "old.json"), "{}")
    fs.utimesSync(join(q.inbox, "new.json"), new Date(now - 10_000), new Date(now - 10_000))
    fs.utimesSync(join(q.inbox, "old.json"), new Date(now - 600_000), new Date(now - 600_000))

    const r = measureLag(q, "ages", now)
    expect(r.oldestInboxAgeSeconds).toBeCloseTo(600, 0)
    expect(r.oldestProcessingAgeSeconds).toBe(0)
  })

  it("leaves done/ and the ages out of the counts-only measure, and done/ out of the ages measure", async () => {
    await using t = await tempQueue()
    fs.writeFileSync(join(t.queue.done, "d.json"), "{}")
    fs.writeFileSync(join(t.queue.inbox, "i.json"), "{}")
    fs.utimesSync(join(t.queue.inbox, "i.json"), new Date(0), new Date(0))
    expect(measureLag(t.queue, "counts")).toMatchObject({ done: 0, oldestInboxAgeSeconds: 0, inbox: 1 })
    expect(measureLag(t.queue, "ages")).toMatchObject({ done: 0, inbox: 1 })
    expect(measureLag(t.queue, "ages").oldestInboxAgeSeconds).toBeGreaterThan(1_000_000_000)
    expect(measureLag(t.queue, "full")).toMatchObject({ done: 1, inbox: 1 })
  })
})

describe("measureLag on names that are not UTF-8", () => {
  // Node takes a path as bytes: the names below are written, dated and renamed through Buffers.
  const at = (dir: string, name: Buffer) => Buffer.concat([Buffer.from(`${dir}/`), name])
  const waiting = Buffer.from([0x78, 0xff, 0x2e, 0x6a, 0x73, 0x6f, 0x6e]) // "x\xff.json"
  const hidden = Buffer.from([0x2e, 0xfe, 0x2e, 0x6a, 0x73, 0x6f, 0x6e]) // ".\xfe.json", not a message

  it("counts, dates and buckets them as the files consume will rename and take, and ignores the hidden ones", async () => {
    await using t = await tempQueue()
    const q = t.queue
    const now = Date.now()
    const old = new Date(now - 7_200_000)
    for (const name of [waiting, hidden]) {
      fs.writeFileSync(at(q.inbox, name), "{}")
      fs.utimesSync(at(q.inbox, name), old, old)
    }
    fs.writeFileSync(at(q.inbox, Buffer.from("p\xff.json", "latin1")), "{}")
    fs.renameSync(
      at(q.inbox, Buffer.from("p\xff.json", "latin1")),
      at(q.processing, Buffer.from("p\xff.json", "latin1")),
    )
    const r = measureLag(q, "ages", now, { histogram: true })
    expect([r.inbox, r.processing, r.ignored]).toEqual([1, 1, 1])
    expect(r.oldestInboxAgeSeconds).toBeCloseTo(7200, 0)
    expect(r.oldestProcessingAgeSeconds).toBeLessThan(60)
    expect(r.histogram?.inbox.reduce((a, b) => a + b, 0)).toBe(1)
    expect(measureLag(q, "counts")).toMatchObject({ inbox: 1, processing: 1, ignored: 1 })
  })
})

describe("lagViolations", () => {
  it("passes at the threshold and fails one above it", () => {
    expect(lagViolations(report({ inbox: 5 }), { threshold: 5, maxAgeSeconds: undefined })).toEqual([])
    expect(lagViolations(report({ inbox: 6 }), { threshold: 5, maxAgeSeconds: undefined })).toEqual([
      "inbox=6 is over the threshold 5",
    ])
  })

  it("fails when the oldest inbox message is older than --max-age, and not at exactly the limit", () => {
    const limits = { threshold: 100, maxAgeSeconds: 300 }
    expect(lagViolations(report({ oldestInboxAgeSeconds: 300 }), limits)).toEqual([])
    expect(lagViolations(report({ oldestInboxAgeSeconds: 301 }), limits)).toHaveLength(1)
    // processing/ age is reported but is not what --max-age checks
    expect(lagViolations(report({ oldestInboxAgeSeconds: 0, oldestProcessingAgeSeconds: 9999 }), limits)).toEqual([])
  })

  it("reports both limits when both are crossed", () => {
    expect(
      lagViolations(report({ inbox: 9, oldestInboxAgeSeconds: 7200 }), { threshold: 1, maxAgeSeconds: 60 }),
    ).toEqual(["inbox=9 is over the threshold 1", "the oldest message in inbox/ is 2h old, over --max-age 60s"])
  })
})

describe("formats", () => {
  it("keeps the default line exactly as docs/monitoring.md specifies it", () => {
    expect(formatLine(report())).toBe("inbox=3 processing=1 error=2\n")
  })

  it("extends the line with done, whole-second ages, ignored and the idle time under --all", () => {
    expect(formatLongLine(report())).toBe(
      "inbox=3 processing=1 error=2 done=18 oldest_inbox_age_seconds=12 oldest_processing_age_seconds=0 ignored=1 idle_seconds=40 deferred=0\n",
    )
  })

  it("writes one JSON object on one line with every field", () => {
    const text = formatJson(report(), { threshold: 2, maxAgeSeconds: 300 }, ["inbox=3 is over the threshold 2"])
    expect(text.endsWith("\n")).toBe(true)
    expect(text.trimEnd()).not.toContain("\n")
    expect(JSON.parse(text)).toEqual({
      root: "/srv/spool",
      inbox: 3,
      processing: 1,
      error: 2,
      done: 18,
      deferred: 0,
      ignored: 1,
      oldest_inbox_age_seconds: 12.346,
      oldest_processing_age_seconds: 0.5,
      idle_seconds: 40.25,
      threshold: 2,
      max_age_seconds: 300,
      stalled_after_seconds: null,
      stalled: false,
      ok: false,
      violations: ["inbox=3 is over the threshold 2"],
    })
  })

  it("writes valid Prometheus exposition with one series per directory", () => {
    const samples = parseExposition(formatPrometheus(report(), { threshold: 2, maxAgeSeconds: 300 }, []))
    const r = 'root="/srv/spool"'
    expect(Object.fromEntries(samples)).toEqual({
      [`spool_messages{${r},dir="inbox"}`]: 3,
      [`spool_messages{${r},dir="processing"}`]: 1,
      [`spool_messages{${r},dir="error"}`]: 2,
      [`spool_messages{${r},dir="done"}`]: 18,
      [`spool_messages{${r},dir="deferred"}`]: 0,
      [`spool_ignored_files{${r},dir="inbox"}`]: 1,
      [`spool_oldest_message_age_seconds{${r},dir="inbox"}`]: 12.346,
      [`spool_oldest_message_age_seconds{${r},dir="processing"}`]: 0.5,
      [`spool_idle_seconds{${r}}`]: 40.25,
      [`spool_lag_threshold{${r}}`]: 2,
      [`spool_lag_max_age_seconds{${r}}`]: 300,
      [`spool_lag_ok{${r}}`]: 1,
    })
  })

  it("escapes a root with quotes, backslashes and newlines so the exposition stays valid", () => {
    const text = formatPrometheus(report({ root: '/srv/a "q"\\b\nc' }), { threshold: 0, maxAgeSeconds: undefined }, [
      "x",
    ])
    const samples = parseExposition(text)
    expect(samples.get(`spool_lag_ok{root="/srv/a \\"q\\"\\\\b\\nc"}`)).toBe(0)
    expect(text).not.toContain("spool_lag_max_age_seconds")
  })

  it("has a validator that rejects broken exposition text", () => {
    expect(() => parseExposition('# TYPE m gauge\nm{root="a"b"} 1\n')).toThrow()
    expect(() => parseExposition("m 1\n")).toThrow()
    expect(() => parseExposition("# TYPE m gauge\nm one\n")).toThrow()
    expect(() => parseExposition("# TYPE m gauge\nm 1\nm 2\n")).toThrow()
  })
})

describe("the age histogram", () => {
  it.each([
    [0, 0],
    [-60_000, 0],
    [4 * 60_000 + 59_999, 0],
    [5 * 60_000, 1],
    [19 * 60_000, 2],
    [20 * 60_000, 3],
    [1279 * 60_000, 8],
    [1280 * 60_000, 9],
    [90 * 86_400_000, 9],
  ])("puts an age of %p ms in bucket %p (under 5, 10, 20, ... minutes, then 1280+)", (ageMs, bucket) => {
    expect(bucketOf(ageMs)).toBe(bucket)
  })

  it("counts each waiting directory's files per bucket, by the clock that dates that directory", async () => {
    await using t = await tempQueue()
    const q = t.queue
    const now = Date.now()
    const put = (dir: string, name: string, minutes: number) => {
      fs.writeFileSync(join(dir, name), "{}")
      const at = new Date(now - minutes * 60_000)
      fs.utimesSync(join(dir, name), at, at)
    }
    put(q.inbox, "a.json", 1)
    put(q.inbox, "b.json", 7)
    put(q.inbox, "c.json", 30)
    put(q.inbox, "d.json", 2000)
    put(q.inbox, ".hidden.json", 2000)
    // processing/ and error/ are dated by ctime (the rename in), which utimes cannot set back.
    put(q.error, "e.json", 600)
    const r = measureLag(q, "counts", now, { histogram: true })
    expect(r.histogram).toEqual({
      inbox: [1, 1, 0, 1, 0, 0, 0, 0, 0, 1],
      processing: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
      error: [1, 0, 0, 0, 0, 0, 0, 0, 0, 0],
      deferred: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    })
    expect(r.ignored).toBe(1)
  })

  it("prints a qshape table: the bucket heads, then one right-aligned row per directory with its total", () => {
    const text = formatHistogram({
      inbox: [1, 1, 0, 1, 0, 0, 0, 0, 0, 12],
      processing: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
      error: [0, 0, 0, 0, 0, 0, 0, 0, 2, 0],
      deferred: [0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    })
    expect(text).toBe(
      [
        "            T 5 10 20 40 80 160 320 640 1280 1280+",
        "     inbox 15 1  1  0  1  0   0   0   0    0    12",
        "processing  0 0  0  0  0  0   0   0   0    0     0",
        "     error  2 0  0  0  0  0   0   0   0    2     0",
        "  deferred  1 0  0  0  0  0   0   0   0    0     1",
        "",
      ].join("\n"),
    )
  })
})

describe("isStalled", () => {
  it.each([
    ["files wait, nothing finished for longer, the oldest waited longer", {}, true],
    ["nothing waits", { inbox: 0, processing: 0 }, false],
    ["something finished within the limit", { idleSeconds: 599 }, false],
    ["the backlog is younger than the limit (a burst after a quiet night)", { oldestInboxAgeSeconds: 30 }, false],
    [
      "only processing/ waits, claimed long ago",
      { inbox: 0, oldestInboxAgeSeconds: 0, processing: 2, oldestProcessingAgeSeconds: 900 },
      true,
    ],
    ["exactly at the limit", { idleSeconds: 600, oldestInboxAgeSeconds: 600 }, false],
  ] as [string, Partial<LagReport>, boolean][])("%s: %p", (_case, over, expected) => {
    const r = report({ inbox: 3, processing: 0, idleSeconds: 1200, oldestInboxAgeSeconds: 1800, ...over })
    expect(isStalled(r, 600)).toBe(expected)
  })

  it("is never stalled without --stalled-after", () => {
    expect(isStalled(report({ idleSeconds: 1e9, oldestInboxAgeSeconds: 1e9 }), undefined)).toBe(false)
  })

  it("says stalled in the line and in the violations", () => {
    const r = report({ idleSeconds: 1200, oldestInboxAgeSeconds: 1800 })
    expect(formatLine(r, true)).toBe("inbox=3 processing=1 error=2 stalled\n")
    expect(lagViolations(r, { threshold: 10, maxAgeSeconds: undefined, stalledAfterSeconds: 600 })).toEqual([
      "stalled: nothing reached done/ or error/ for 20m while 4 files wait (--stalled-after 10m)",
    ])
  })
})

describe("plugin mode", () => {
  const limits: PluginLimits = {
    counts: { inbox: { warning: parseRange("warning", "10"), critical: parseRange("critical", "50") } },
    warningAgeSeconds: 300,
    criticalAgeSeconds: 900,
    stalledAfterSeconds: 600,
  }

  it.each([
    [["Q", "--warning", "3"], true],
    [["Q", "--critical=3"], true],
    [["Q", "--warning-age", "5m"], true],
    [["--critical-age=1h", "Q"], true],
    [["Q", "10"], false],
    [["Q", "10", "--max-age", "5m"], false],
    [["Q", "--", "--warning"], false],
    [["Q", "--warnings"], false],
  ])("judges %p as plugin mode: %p", (argv, expected) => {
    expect(isPluginMode(argv)).toBe(expected)
  })

  it.each([
    ["OK within every limit", {}, "OK", 0],
    ["WARNING one file over --warning", { inbox: 11 }, "WARNING", 1],
    ["OK at exactly --warning", { inbox: 10 }, "OK", 0],
    ["CRITICAL over --critical", { inbox: 51 }, "CRITICAL", 1],
    ["WARNING over --warning-age", { oldestInboxAgeSeconds: 301 }, "WARNING", 1],
    ["CRITICAL over --critical-age", { oldestInboxAgeSeconds: 901 }, "CRITICAL", 1],
    ["CRITICAL when stalled, the stall first", { idleSeconds: 700, oldestInboxAgeSeconds: 700 }, "CRITICAL", 2],
  ] as [string, Partial<LagReport>, string, number][])("%s", (_case, over, state, reasons) => {
    const r = report({ inbox: 3, oldestInboxAgeSeconds: 12, idleSeconds: 5, ...over })
    const v = judgePlugin(r, limits)
    expect(v.state).toBe(state as never)
    expect(v.reasons.length).toBe(state === "OK" ? 0 : reasons)
    if (_case.includes("stalled")) expect(v.reasons[0]).toStartWith("stalled: nothing reached done/ or error/ for 11m")
  })

  it("prints the status line with perfdata: units for seconds, warn;crit;min, empty fields where no limit", () => {
    const r = report({ inbox: 3, processing: 0, error: 0, ignored: 0, oldestInboxAgeSeconds: 12.7, idleSeconds: 4 })
    expect(formatPlugin(r, limits, judgePlugin(r, limits))).toBe(
      "SPOOL OK - inbox=3 processing=0 error=0 deferred=0 ignored=0 oldest=12s | " +
        "inbox=3;10;50;0 processing=0;;;0 error=0;;;0 ignored=0;;;0 deferred=0;;;0 oldest=12s;300;900;0 oldest_processing=0s;;;0 idle=4s;;;0\n",
    )
  })

  it.each([
    ["10", [0, 10], [11]],
    ["10:", [10, 99], [9, 0]],
    ["~:10", [0, 10], [11]],
    ["10:20", [10, 15, 20], [9, 21]],
    ["@10:20", [9, 21], [10, 15, 20]],
  ] as const)("reads the Nagios range %s as the plugin guidelines define it", (text, calm, alerting) => {
    const range = parseRange("warning", text)
    for (const n of calm) expect(isAlert(range, n)).toBe(false)
    for (const n of alerting) expect(isAlert(range, n)).toBe(true)
  })

  it.each(["", "ten", "20:10", "@", "1:2:3", "~"])("refuses %p as a range, naming the forms", (text) => {
    expect(() => parseRange("warning", text)).toThrow("--warning takes a Nagios range (10, 10:, ~:10, 10:20 or @10:20)")
  })

  it("judges error/ and deferred/ by their own ranges and puts the ranges in the perfdata", () => {
    const l: PluginLimits = {
      counts: {
        error: { warning: parseRange("warning-error", "0"), critical: parseRange("critical-error", "@10:20") },
        deferred: { warning: parseRange("warning-deferred", "5:") },
      },
      warningAgeSeconds: undefined,
      criticalAgeSeconds: undefined,
      stalledAfterSeconds: undefined,
    }
    const r = report({ inbox: 0, error: 12, deferred: 2 })
    const v = judgePlugin(r, l)
    expect(v).toEqual({
      state: "CRITICAL",
      reasons: ["error=12 is inside the critical range @10:20", "deferred=2 is below the warning threshold 5"],
    })
    expect(formatPlugin(r, l, v)).toContain(" error=12;0;@10:20;0 ")
    expect(formatPlugin(r, l, v)).toContain(" deferred=2;5:;;0 ")
    expect(judgePlugin(report({ error: 2, deferred: 5 }), l)).toEqual({
      state: "WARNING",
      reasons: ["error=2 is over the warning threshold 0"],
    })
  })

  it("puts the reasons before the counts, critical first", () => {
    const r = report({ inbox: 60, oldestInboxAgeSeconds: 400 })
    const line = formatPlugin(r, limits, judgePlugin(r, limits))
    expect(line).toStartWith(
      "SPOOL CRITICAL - inbox=60 is over the critical threshold 50; the oldest message in inbox/ is 6m old, over the warning age 5m: inbox=60 ",
    )
  })
})
