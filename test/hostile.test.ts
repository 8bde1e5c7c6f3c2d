// Whatever lands in inbox/, the real consume process ends each input in exactly one of done/
// or error/ with the right reason, never hangs, and touches nothing outside the queue root.
// Each corpus runs on both ledgers, and ends with the same files, reasons and details on both.
import { afterAll, beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join } from "node:path"
import { decodeMessage, Message } from "@spool/core"
import {
  availableLedgers,
  type BoundedRun,
  consumeBounded,
  corpusEndState,
  hostileNames,
  type LedgerKind,
  type LedgerRows,
  ledgerRows,
  parseCsv,
  queueListing,
  readErrorCsv,
  repoRoot,
  rng,
  run,
  type TempQueue,
  type TestLedger,
  tempQueue,
  testLedger,
} from "@spool/test-support"

const ledgers = await availableLedgers()

/** What one scenario left on one ledger. */
interface LedgerRun<T> {
  readonly q: TempQueue
  readonly result: T
  readonly rows: LedgerRows
  readonly end: Awaited<ReturnType<typeof corpusEndState>>
}

type ConsumeOn = (args?: readonly string[], options?: { timeoutMs?: number }) => Promise<BoundedRun>

/**
 * Plays `scenario` (fill a fresh queue, consume it with `consume`, bound to the ledger) once
 * per ledger before the enclosing describe's tests, and removes queues and databases after.
 */
function onEachLedger<T>(scenario: (q: TempQueue, consume: ConsumeOn) => Promise<T>): Map<LedgerKind, LedgerRun<T>> {
  const runs = new Map<LedgerKind, LedgerRun<T>>()
  const held: AsyncDisposable[] = []
  beforeAll(async () => {
    await Promise.all(
      ledgers.map(async (kind) => {
        const ledger: TestLedger = await testLedger(kind)
        const q = await tempQueue()
        held.push(q, ledger)
        const result = await scenario(q, (args = [], options = {}) =>
          consumeBounded(q.root, [...ledger.args, ...args], options),
        )
        runs.set(kind, { q, result, rows: await ledger.rows(q.root), end: await corpusEndState(q.root, ledger) })
      }),
    )
  }, slow)
  afterAll(async () => {
    for (const h of held) await h[Symbol.asyncDispose]()
  })
  return runs
}

/** The run of `kind`, which beforeAll has made. */
const on = <T>(runs: Map<LedgerKind, LedgerRun<T>>, kind: LedgerKind): LedgerRun<T> => {
  const r = runs.get(kind)
  if (r === undefined) throw new Error(`no run on the ${kind} ledger`)
  return r
}

/** The test that the scenario ended alike on both ledgers (skipped when PostgreSQL is not there). */
function itEndsAlikeOnBothLedgers<T>(runs: Map<LedgerKind, LedgerRun<T>>): void {
  it.skipIf(ledgers.length < 2)(
    "ends with the same files, reports, reasons and details on the SQLite and PostgreSQL ledgers",
    () => {
      const sqlite = on(runs, "SQLite").end
      expect(sqlite.error).not.toEqual({})
      expect(on(runs, "PostgreSQL").end).toEqual(sqlite)
    },
  )
}

const ok = (id: string, extra = "") => `{"msg_id":"${id}","order_no":"o-${id}","seq":1,"amount":1.5${extra}}`
const deep = (open: string, close: string, n = 100_000) => open.repeat(n) + close.repeat(n)
/** n random letters, which no compressor shrinks much (a PostgreSQL index entry is limited in stored bytes). */
const letters = (n: number, next = rng(n)) =>
  Array.from({ length: n }, () => String.fromCharCode(97 + Math.floor(next() * 26))).join("")

/** Tests that spawn consume: generous, since other work may share the machine's two cores. */
const slow = 60_000

type Expect = "done" | "parse" | "missing-field" | "invalid-field"

// [file name, content, where it must end, and for done/ the amount text stored]
const contentCases: readonly (readonly [string, string | Uint8Array, Expect, string?])[] = [
  ["not-json.json", "hello, world", "parse"],
  ["truncated.json", '{"msg_id":"truncated","order_no":"o","seq":1,', "parse"],
  ["empty.json", "", "parse"],
  ["whitespace.json", " \n\t ", "parse"],
  ["binary.json", new Uint8Array([0x00, 0x01, 0x7b, 0x7d, 0x00, 0xfe, 0xff, 0x80]), "parse"],
  [
    "invalid-utf8.json",
    Buffer.concat([Buffer.from('{"msg_id":"bad'), Buffer.of(0xc3, 0x28), Buffer.from('"}')]),
    "parse",
  ],
  ["utf16.json", Buffer.from(`\uFEFF${ok("utf16")}`, "utf16le"), "parse"],
  // Decision: a UTF-8 byte order mark is accepted and dropped (Windows tools write one).
  ["bom.json", `\uFEFF${ok("bom")}`, "done", "1.5"],
  ["two-boms.json", `\uFEFF\uFEFF${ok("two-boms")}`, "parse"],
  ["array.json", `[${ok("array")}]`, "parse"],
  ["string.json", '"a string"', "parse"],
  ["null.json", "null", "parse"],
  ["number.json", "42", "parse"],
  ["true.json", "true", "parse"],
  ["two-values.json", `${ok("two-values")}${ok("two-values-b")}`, "parse"],
  // Decision: depth is no reason to reject. JSON.parse in Bun is not recursive, so 100,000 levels
  // parse; the top level decides (an array is parse, an object without the fields missing-field),
  // and deep nesting inside an otherwise valid message is an extra field, ignored.
  ["deep-array.json", deep("[", "]"), "parse"],
  ["deep-object.json", deep('{"a":', "}").replace(/}+$/, (m) => `1${m}`), "missing-field"],
  ["deep-inside.json", ok("deep-inside", `,"extra":${deep("[", "]")}`), "done", "1.5"],
  [
    "deep-inside-object.json",
    ok("deep-inside-object", `,"x":${deep('{"a":', "}").replace(/}+$/, (m) => `1${m}`)}`),
    "done",
    "1.5",
  ],
  ["deep-amount.json", `{"msg_id":"deep-amount","order_no":"o","seq":1,"amount":${deep("[", "]")}}`, "invalid-field"],
  ["all-null.json", '{"msg_id":null,"order_no":null,"seq":null,"amount":null}', "missing-field"],
  ["msg-id-null.json", '{"msg_id":null,"order_no":"o","seq":1,"amount":1}', "missing-field"],
  ["amount-absent.json", '{"msg_id":"amount-absent","order_no":"o","seq":1}', "missing-field"],
  ["empty-object.json", "{}", "missing-field"],
  ["msg-id-empty.json", '{"msg_id":"","order_no":"o","seq":1,"amount":1}', "invalid-field"],
  ["order-no-empty.json", '{"msg_id":"order-no-empty","order_no":"","seq":1,"amount":1}', "invalid-field"],
  ["msg-id-number.json", '{"msg_id":7,"order_no":"o","seq":1,"amount":1}', "invalid-field"],
  ["order-no-object.json", '{"msg_id":"order-no-object","order_no":{},"seq":1,"amount":1}', "invalid-field"],
  ["msg-id-newline.json", '{"msg_id":"a\\nb","order_no":"o","seq":1,"amount":1}', "invalid-field"],
  ["msg-id-lone-surrogate.json", '{"msg_id":"a\\ud800","order_no":"o","seq":1,"amount":1}', "invalid-field"],
  [
    "order-no-lone-surrogate.json",
    '{"msg_id":"order-no-lone","order_no":"\\udc00","seq":1,"amount":1}',
    "invalid-field",
  ],
  ["msg-id-reversed-pair.json", '{"msg_id":"\\udc00\\ud800","order_no":"o","seq":1,"amount":1}', "invalid-field"],
  // A surrogate pair written as two escapes is one well-formed character: a valid id.
  ["🧨.json", '{"msg_id":"\\ud83e\\udde8","order_no":"o","seq":1,"amount":1}', "done", "1"],
  ["msg-id-nul-escape.json", '{"msg_id":"a\\u0000b","order_no":"o","seq":1,"amount":1}', "invalid-field"],
  // Over 1024 bytes in UTF-8 an id is no ledger key: on PostgreSQL it would abort every commit of its batch.
  ["msg-id-8000-bytes.json", `{"msg_id":"${letters(8000)}","order_no":"o","seq":1,"amount":1}`, "invalid-field"],
  [
    "order-no-3000-bytes.json",
    `{"msg_id":"order-no-3000","order_no":"${letters(3000)}","seq":1,"amount":1}`,
    "invalid-field",
  ],
  ["msg-id-1026-bytes.json", `{"msg_id":"${"€".repeat(342)}","order_no":"o","seq":1,"amount":1}`, "invalid-field"],
  ["order-no-nul-escape.json", '{"msg_id":"order-no-nul","order_no":"\\u0000","seq":1,"amount":1}', "invalid-field"],
  ["seq-nul-string.json", '{"msg_id":"seq-nul-string","order_no":"o","seq":"\\u0000","amount":1}', "invalid-field"],
  // U+0000 and lone surrogates in fields spool does not interpret are the application's data.
  ["extra-nul-surrogate.json", ok("extra-nul-surrogate", ',"note":"\\u0000\\ud800","\\u0000":1'), "done", "1.5"],
  // Raw NUL bytes are valid UTF-8 but never valid JSON, and the parser's message quotes them.
  ["nul-byte-after.json", `${ok("nul-byte-after")}\0`, "parse"],
  ["nul-byte-only.json", "\0", "parse"],
  ["nul-byte-in-string.json", '{"msg_id":"a\0b","order_no":"o","seq":1,"amount":1}', "parse"],
  // A surrogate encoded in UTF-8 bytes (CESU-8) is not UTF-8.
  [
    "surrogate-bytes.json",
    Buffer.concat([Buffer.from('{"msg_id":"'), Buffer.of(0xed, 0xa0, 0x80), Buffer.from('"}')]),
    "parse",
  ],
  ["seq-fraction.json", '{"msg_id":"seq-fraction","order_no":"o","seq":1.5,"amount":1}', "invalid-field"],
  [
    "seq-hidden-fraction.json",
    '{"msg_id":"seq-hidden-fraction","order_no":"o","seq":2.0000000000000001,"amount":1}',
    "invalid-field",
  ],
  ["seq-zero.json", '{"msg_id":"seq-zero","order_no":"o","seq":0,"amount":1}', "invalid-field"],
  ["seq-negative.json", '{"msg_id":"seq-negative","order_no":"o","seq":-3,"amount":1}', "invalid-field"],
  ["seq-string.json", '{"msg_id":"seq-string","order_no":"o","seq":"1","amount":1}', "invalid-field"],
  ["seq-bool.json", '{"msg_id":"seq-bool","order_no":"o","seq":true,"amount":1}', "invalid-field"],
  [
    "seq-2p53-plus-1.json",
    '{"msg_id":"seq-2p53-plus-1","order_no":"o","seq":9007199254740993,"amount":1}',
    "invalid-field",
  ],
  ["seq-1e400.json", '{"msg_id":"seq-1e400","order_no":"o","seq":1e400,"amount":1}', "invalid-field"],
  // A whole number written with a zero fraction or an exponent is still that whole number.
  ["seq-3-point-0.json", '{"msg_id":"seq-3-point-0","order_no":"o","seq":3.0,"amount":1}', "done", "1"],
  ["seq-max-safe.json", '{"msg_id":"seq-max-safe","order_no":"o","seq":9007199254740991,"amount":1}', "done", "1"],
  ["amount-string.json", '{"msg_id":"amount-string","order_no":"o","seq":1,"amount":"1.50"}', "invalid-field"],
  ["amount-1e400.json", '{"msg_id":"amount-1e400","order_no":"o","seq":1,"amount":1e400}', "invalid-field"],
  [
    "amount-minus-1e400.json",
    '{"msg_id":"amount-minus-1e400","order_no":"o","seq":1,"amount":-1e400}',
    "invalid-field",
  ],
  ["amount-NaN.json", '{"msg_id":"amount-NaN","order_no":"o","seq":1,"amount":NaN}', "parse"],
  ["amount-Infinity.json", '{"msg_id":"amount-Infinity","order_no":"o","seq":1,"amount":Infinity}', "parse"],
  ["amount-NaN-string.json", '{"msg_id":"amount-NaN-string","order_no":"o","seq":1,"amount":"NaN"}', "invalid-field"],
  ["amount-bool.json", '{"msg_id":"amount-bool","order_no":"o","seq":1,"amount":false}', "invalid-field"],
  [
    "amount-many-digits.json",
    '{"msg_id":"amount-many-digits","order_no":"o","seq":1,"amount":12345678901234567.89}',
    "done",
    "12345678901234567.89",
  ],
  ["amount-tiny.json", '{"msg_id":"amount-tiny","order_no":"o","seq":1,"amount":1e-400}', "done", "1e-400"],
  ["amount-spaced.json", '{ "msg_id" : "amount-spaced" , "order_no":"o","seq":1, "amount" :\n\t0.10 }', "done", "0.10"],
  // JSON.parse keeps the last of duplicate keys; the stored spelling must be that same last one.
  [
    "dup-key-amount.json",
    '{"msg_id":"dup-key-amount","order_no":"o","seq":1,"amount":"x","amount":2.50}',
    "done",
    "2.50",
  ],
  [
    "dup-key-amount-null.json",
    '{"msg_id":"dup-key-amount-null","order_no":"o","seq":1,"amount":2,"amount":null}',
    "missing-field",
  ],
  [
    "dup-key-escaped.json",
    '{"msg_id":"dup-key-escaped","order_no":"o","seq":1,"amount":1,"\\u0061mount":7.70}',
    "done",
    "7.70",
  ],
  [
    "dup-key-msg-id.json",
    '{"msg_id":"first","msg_id":"dup-key-msg-id","order_no":"o","seq":1,"amount":4}',
    "done",
    "4",
  ],
  ["proto.json", ok("proto", ',"__proto__":{"polluted":true,"msg_id":"evil"}'), "done", "1.5"],
  ["proto-only.json", '{"__proto__":{"msg_id":"p","order_no":"o","seq":1,"amount":1}}', "missing-field"],
  ["constructor.json", ok("constructor", ',"constructor":{"prototype":{"polluted":true}}'), "done", "1.5"],
]

/** The msg_id every done/ case carries: its file name without .json. */
const idOf = (name: string) => name.replace(/\.json$/, "")

describe("consume on a table of hostile contents", () => {
  const runs = onEachLedger(async (q, consume) => {
    for (const [name, content] of contentCases) q.put(name, content)
    return consume()
  })

  it.each(ledgers)("finishes with exit 0 and a summary, without being killed, on the %s ledger", (kind) => {
    const { result } = on(runs, kind)
    expect(result.signal).toBeNull()
    expect(result.stderr).toContain("level=notice msg=done ")
    expect(result.exitCode).toBe(0)
  })

  it.each(ledgers)(
    "ends every input in exactly one of done/ or error/, leaving inbox/ and processing/ empty, on the %s ledger",
    (kind) => {
      const l = queueListing(on(runs, kind).q.root)
      expect(l.inbox).toEqual([])
      expect(l.processing).toEqual([])
      expect([...l.done, ...l.error].sort()).toEqual(contentCases.map(([n]) => n).sort())
    },
  )

  it.each(
    ledgers.flatMap((kind) =>
      contentCases.map(([name, , expected, amount]) => [name, expected, kind, amount] as const),
    ),
  )("%s ends as %s on the %s ledger", (name, expected, kind, amount) => {
    const { q, rows } = on(runs, kind)
    const l = queueListing(q.root)
    const csv = readErrorCsv(q.root)
    if (expected === "done") {
      expect(l.done).toContain(name)
      expect(csv.has(name)).toBe(false)
      const row = rows.processed.get(idOf(name))
      expect(row?.file).toBe(name)
      expect(row?.amount).toBe(amount as string)
    } else {
      expect(l.error).toContain(name)
      expect(csv.get(name)).toBe(expected)
      expect(rows.failures.get(name)?.reason).toBe(expected)
    }
  })

  it.each(ledgers)("stores seq exactly as the whole number written, on the %s ledger", (kind) => {
    const { rows } = on(runs, kind)
    expect(rows.processed.get("seq-3-point-0")?.seq).toBe(3)
    expect(rows.processed.get("seq-max-safe")?.seq).toBe(Number.MAX_SAFE_INTEGER)
    expect(rows.processed.has("first")).toBe(false)
  })

  it.each(ledgers)("stores U+0000 and lone surrogates of a detail as visible escapes, on the %s ledger", (kind) => {
    const { rows } = on(runs, kind)
    expect(rows.failures.get("nul-byte-after.json")?.detail).toBe("JSON Parse error: Unrecognized token '\\u0000'")
    expect(rows.failures.get("msg-id-lone-surrogate.json")?.detail).toBe(
      'msg_id must be well-formed Unicode without control characters (was "a\\ud800")',
    )
    for (const f of rows.failures.values()) expect(f.detail.isWellFormed() && !f.detail.includes("\0")).toBe(true)
  })

  it.each(ledgers)(
    "lists in error.csv exactly the files in error/, and leaves no claim behind, on the %s ledger",
    (kind) => {
      const { q, rows } = on(runs, kind)
      expect([...readErrorCsv(q.root).keys()].sort()).toEqual(queueListing(q.root).error)
      expect(rows.claims).toBe(0)
    },
  )

  itEndsAlikeOnBothLedgers(runs)
})

describe("decodeMessage in-process", () => {
  it("never touches Object.prototype, whatever __proto__ or constructor keys a message carries", () => {
    const texts = [
      ok("p1", ',"__proto__":{"polluted":"yes","msg_id":"evil"}'),
      ok("p2", ',"constructor":{"prototype":{"polluted":"yes"}}'),
      '{"__proto__":{"__proto__":{"polluted":"yes"}},"msg_id":"p3","order_no":"o","seq":1,"amount":1}',
      '{"__proto__":null,"msg_id":"p4","order_no":"o","seq":1,"amount":1}',
    ]
    for (const t of texts) {
      const d = decodeMessage(new TextEncoder().encode(t), Message)
      expect(d.ok).toBe(true)
      if (d.ok) {
        expect(Object.getPrototypeOf(d.message)).toBe(Object.prototype)
        expect(d.message.msg_id).toMatch(/^p\d$/)
      }
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
    expect(Object.prototype).not.toHaveProperty("polluted")
    expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain("msg_id")
  })

  it("does not take a required field from a __proto__ key", () => {
    const d = decodeMessage(
      new TextEncoder().encode('{"__proto__":{"msg_id":"x","order_no":"o","seq":1,"amount":1}}'),
      Message,
    )
    expect(d).toMatchObject({ ok: false, reason: "missing-field" })
  })
})

describe("consume on things that are not regular files", () => {
  describe("a FIFO, a directory, a socket, symlinks and a 2 GiB file", () => {
    const old = new Date(Date.now() - 3 * 86_400_000)
    const runs = onEachLedger(async (q, consume) => {
      q.put("valid.json", ok("valid"))
      const inbox = join(q.root, "inbox")
      // The link target lives outside the queue root; it must stay exactly as it was.
      const outside = join(q.path, "outside-secret.json")
      fs.writeFileSync(outside, ok("outside"))
      fs.utimesSync(outside, old, old)
      const outsideBefore = fs.statSync(outside)
      fs.symlinkSync(outside, join(inbox, "link-out.json"))
      fs.symlinkSync(join(q.path, "no-such-file"), join(inbox, "dangling.json"))
      fs.symlinkSync(q.path, join(inbox, "link-dir.json"))
      const mkfifo = Bun.spawnSync(["mkfifo", join(inbox, "fifo.json")])
      if (mkfifo.exitCode !== 0) throw new Error("mkfifo failed")
      fs.mkdirSync(join(inbox, "dir.json"))
      fs.writeFileSync(join(inbox, "dir.json", "inner.json"), ok("inner"))
      // A sparse 2 GiB file: reading it would take seconds and 2 GiB; its atime shows any read.
      const big = join(inbox, "big.json")
      fs.writeFileSync(big, "")
      fs.truncateSync(big, 2 * 1024 ** 3)
      fs.utimesSync(big, old, new Date())
      const socket = Bun.listen({ unix: join(inbox, "socket.json"), socket: { data() {} } })
      try {
        return { run: await consume([], { timeoutMs: 30_000 }), outside, outsideBefore }
      } finally {
        socket.stop(true)
      }
    })

    it.each(ledgers)("moves them to error/ without opening or reading them, on the %s ledger", (kind) => {
      const { q, result } = on(runs, kind)
      const { run, outside, outsideBefore } = result
      expect(run.signal).toBeNull()
      expect(run.exitCode).toBe(0)

      const expected: Record<string, string> = {
        "link-out.json": "symlink",
        "dangling.json": "symlink",
        "link-dir.json": "symlink",
        "fifo.json": "not-regular",
        "dir.json": "not-regular",
        "big.json": "too-large",
        "socket.json": "not-regular",
      }
      const l = queueListing(q.root)
      expect(l.inbox).toEqual([])
      expect(l.processing).toEqual([])
      expect(l.done).toEqual(["valid.json"])
      expect(l.error).toEqual(Object.keys(expected).sort())
      expect(Object.fromEntries(readErrorCsv(q.root))).toEqual(expected)

      const e = (n: string) => fs.lstatSync(join(q.root, "error", n))
      expect(e("link-out.json").isSymbolicLink()).toBe(true)
      expect(fs.readlinkSync(join(q.root, "error", "link-out.json"))).toBe(outside)
      expect(e("fifo.json").isFIFO()).toBe(true)
      expect(e("socket.json").isSocket()).toBe(true)
      expect(fs.readdirSync(join(q.root, "error", "dir.json"))).toEqual(["inner.json"])
      expect(e("big.json").size).toBe(2 * 1024 ** 3)
      expect(e("big.json").atimeMs).toBe(old.getTime())
      // The target outside the queue: same bytes, never modified, never even read.
      const outsideAfter = fs.statSync(outside)
      expect(fs.readFileSync(outside, "utf8")).toBe(ok("outside"))
      expect(outsideAfter.mtimeMs).toBe(outsideBefore.mtimeMs)
      expect(outsideAfter.atimeMs).toBe(outsideBefore.atimeMs)
      expect(fs.readdirSync(q.path).sort()).toEqual(["outside-secret.json", "q"])
    })

    itEndsAlikeOnBothLedgers(runs)
  })

  it(
    "honours --max-bytes: a file of exactly the limit is read, one byte more is too-large",
    async () => {
      const at = ok("at-limit")
      const over = ok("over-limit", ',"pad":"x"')
      await using q = await tempQueue({ seed: { "at.json": at, "over.json": over } })
      const limit = Buffer.byteLength(at)
      expect(Buffer.byteLength(over)).toBeGreaterThan(limit)
      const run = await consumeBounded(q.root, ["--max-bytes", String(limit)])
      expect(run.exitCode).toBe(0)
      expect(queueListing(q.root)).toMatchObject({ inbox: [], processing: [], done: ["at.json"], error: ["over.json"] })
      expect(ledgerRows(q.root).failures.get("over.json")?.reason).toBe("too-large")
    },
    slow,
  )

  it(
    "reads a file above 64 MiB whole when --max-bytes allows it",
    async () => {
      // The run's read buffer stops at 64 MiB; a larger limit must not truncate the message.
      const pad = "x".repeat(65 * 1024 * 1024)
      await using q = await tempQueue({ seed: { "huge.json": ok("huge", `,"pad":"${pad}"`) } })
      // At the largest limit: each file's buffer is of its own size, not of the limit's.
      const run = await consumeBounded(q.root, ["--max-bytes", "1g"])
      expect(run.exitCode).toBe(0)
      expect(queueListing(q.root)).toMatchObject({ inbox: [], processing: [], done: ["huge.json"], error: [] })
      expect(ledgerRows(q.root).processed.get("huge")?.amount).toBe("1.5")
    },
    slow,
  )

  it(
    "ignores hidden names and names that do not end in .json, leaving them untouched in inbox/",
    async () => {
      await using q = await tempQueue({
        seed: { ".hidden.json": ok("h"), "x.json.tmp": ok("t"), "x.txt": ok("x"), "X.JSON": ok("X"), ".json": ok("j") },
      })
      const run = await consumeBounded(q.root)
      expect(run.exitCode).toBe(0)
      expect(queueListing(q.root)).toEqual({
        inbox: [".hidden.json", ".json", "X.JSON", "x.json.tmp", "x.txt"],
        processing: [],
        done: [],
        error: [],
      })
    },
    slow,
  )
})

describe("consume on hostile file names", () => {
  const long = (unit: string, valid: boolean) => {
    const stem = unit.repeat(Math.floor((255 - 5) / Buffer.byteLength(unit)))
    return { name: `${stem}.json`, content: valid ? ok(`long-${unit}`) : "not json" }
  }
  const names: Record<string, string> = {
    "with space.json": ok("space"),
    "a,b.json": "bad, with comma",
    'quo"te.json': "bad quote",
    '"fully quoted".json': ok("fully-quoted"),
    "new\nline.json": "bad newline",
    "carriage\rreturn.json": "bad cr",
    "tab\there.json": ok("tab"),
    "ünïcødé-日本語.json": "bad unicode",
    "emoji-🧨.json": ok("emoji"),
    "-leading-dash.json": "bad dash",
    "--help.json": ok("help"),
    "$(touch pwned).json": "bad shell",
    "; rm -rf x.json": ok("semicolon"),
    "=cmd|' -C calc'!A0.json": "bad formula",
  }
  // The shared corpus too: every third name a valid message, the rest unparsable.
  hostileNames.forEach((name, i) => {
    names[name] = i % 3 === 0 ? ok(`corpus-${i}`) : "bad corpus"
  })
  for (const [unit, valid] of [
    ["x", true],
    ["é", false],
    ["y", false],
  ] as const) {
    const l = long(unit, valid)
    names[l.name] = l.content
  }

  describe("every kind of name in one run", () => {
    const runs = onEachLedger(async (q, consume) => {
      for (const [name, content] of Object.entries(names)) q.put(name, content)
      return consume()
    })

    it.each(ledgers)(
      "keeps every name intact and error.csv valid RFC 4180 CSV matching error/, on the %s ledger",
      (kind) => {
        const { q, result } = on(runs, kind)
        expect(result.exitCode).toBe(0)
        const l = queueListing(q.root)
        expect(l.inbox).toEqual([])
        expect(l.processing).toEqual([])
        expect([...l.done, ...l.error].sort()).toEqual(Object.keys(names).sort())
        const isValid = (n: string) => (names[n] as string).startsWith("{")
        expect(l.done).toEqual(Object.keys(names).filter(isValid).sort())
        const csv = readErrorCsv(q.root)
        expect([...csv.keys()].sort()).toEqual(l.error)
        for (const reason of csv.values()) expect(reason).toBe("parse")
        // Nothing was interpreted by a shell.
        expect(fs.existsSync(join(q.root, "..", "pwned"))).toBe(false)
        expect(fs.existsSync("pwned")).toBe(false)
      },
    )

    itEndsAlikeOnBothLedgers(runs)
  })

  describe("a long name that clashes in error/", () => {
    const ascii = long("y", false).name
    const multi = long("é", false).name
    const runs = onEachLedger(async (q, consume) => {
      const results: BoundedRun[] = []
      for (const round of [1, 2]) {
        q.put(ascii, `bad ${round}`)
        q.put(multi, `bad ${round}`)
        results.push(await consume())
      }
      return results
    })

    it.each(ledgers)("gets an alternative that fits in 255 bytes, on the %s ledger", (kind) => {
      const { q, result, rows } = on(runs, kind)
      expect(Buffer.byteLength(ascii)).toBeLessThanOrEqual(255)
      expect(Buffer.byteLength(multi)).toBeGreaterThan(250)
      expect(result.map((r) => r.exitCode)).toEqual([0, 0])
      const l = queueListing(q.root)
      expect(l.inbox).toEqual([])
      expect(l.error).toHaveLength(4)
      for (const n of l.error) {
        expect(Buffer.byteLength(n)).toBeLessThanOrEqual(255)
        expect(n.endsWith(".json")).toBe(true)
        expect(n).not.toContain("\uFFFD")
      }
      expect(l.error.filter((n) => /~1\.json$/.test(n))).toHaveLength(2)
      // Each copy kept its own bytes: two rounds, two distinct contents per name.
      const contents = l.error.map((n) => fs.readFileSync(join(q.root, "error", n), "utf8")).sort()
      expect(contents).toEqual(["bad 1", "bad 1", "bad 2", "bad 2"])
      const csv = readErrorCsv(q.root)
      expect([...csv.keys()].sort()).toEqual(l.error)
      for (const reason of csv.values()) expect(reason).toBe("parse")
      // The ledger follows the rename made at move time.
      expect([...rows.failures.keys()].sort()).toEqual(l.error)
    })

    itEndsAlikeOnBothLedgers(runs)
  })

  describe("names that are not valid UTF-8", () => {
    const runs = onEachLedger(async (q, consume) => {
      q.put("plain.json", ok("plain"))
      const inbox = Buffer.from(`${join(q.root, "inbox")}/`)
      const put = (bytes: Buffer, content: string) => fs.writeFileSync(Buffer.concat([inbox, bytes]), content)
      // bad-\xff.json (valid message), caf\xe9.json (Latin-1 é, not a message), and a hidden one.
      put(Buffer.concat([Buffer.from("bad-"), Buffer.of(0xff), Buffer.from(".json")]), ok("nonutf8"))
      put(Buffer.concat([Buffer.from("caf"), Buffer.of(0xe9), Buffer.from(".json")]), "not json")
      put(Buffer.concat([Buffer.from(".h"), Buffer.of(0xfe), Buffer.from(".json")]), "hidden")
      // A surrogate encoded in UTF-8 bytes, which must not reach the ledger as a lone surrogate,
      // and a real U+FFFD, which is a valid name like any other.
      put(Buffer.concat([Buffer.from("sur"), Buffer.of(0xed, 0xa0, 0x80), Buffer.from(".json")]), ok("surrogate"))
      put(Buffer.from("rep\uFFFD.json"), ok("replacement"))
      return consume([], { timeoutMs: 30_000 })
    })

    it.each(ledgers)("are renamed to their %%XX spelling and consumed like any file, on the %s ledger", (kind) => {
      const { q, result, rows } = on(runs, kind)
      expect(result.signal).toBeNull()
      expect(result.exitCode).toBe(0)
      expect(result.stderr).toContain("renamed")
      const l = queueListing(q.root)
      expect(l.processing).toEqual([])
      expect(l.done).toEqual(["bad-%FF.json", "plain.json", "rep\uFFFD.json", "sur%ED%A0%80.json"])
      expect(l.error).toEqual(["caf%E9.json"])
      expect(Object.fromEntries(readErrorCsv(q.root))).toEqual({ "caf%E9.json": "parse" })
      expect(rows.processed.get("nonutf8")?.file).toBe("bad-%FF.json")
      expect(rows.processed.get("surrogate")?.file).toBe("sur%ED%A0%80.json")
      expect(rows.processed.get("replacement")?.file).toBe("rep\uFFFD.json")
      // The hidden one is ignored like any hidden name: still there, under its raw bytes.
      const raw = fs.readdirSync(join(q.root, "inbox"), { encoding: "buffer" })
      expect(raw).toEqual([Buffer.concat([Buffer.from(".h"), Buffer.of(0xfe), Buffer.from(".json")])])
    })

    itEndsAlikeOnBothLedgers(runs)
  })
})

describe("consume on long names that are not valid UTF-8", () => {
  // Each name is a list of units: valid text, or one bad byte (0xff) that becomes %FF.
  type Unit = string | 0xff
  const bytesOf = (units: readonly Unit[]) =>
    Buffer.concat(units.map((u) => (u === 0xff ? Buffer.of(0xff) : Buffer.from(u))))
  const spellingOf = (units: readonly Unit[]) => units.map((u) => (u === 0xff ? "%FF" : u)).join("")
  /** `size` raw bytes: units from `pattern` repeated, cut to fit, then `.json`. */
  const named = (size: number, pattern: readonly Unit[], last: Unit[] = []): Unit[] => {
    const units: Unit[] = []
    const room = size - 5 - bytesOf(last).length
    for (let i = 0; bytesOf(units).length < room; i++) {
      const u = pattern[i % pattern.length] as Unit
      units.push(bytesOf([...units, u]).length <= room ? u : "x")
    }
    return [...units, ...last, ".json"]
  }
  const inputs: Unit[][] = []
  for (let size = 250; size <= 255; size++) {
    inputs.push(named(size, [0xff]))
    inputs.push(named(size, ["日", 0xff]))
    inputs.push(named(size, ["a"], [0xff]))
  }
  // Two names that differ only past the point where both must be cut.
  inputs.push(named(255, [0xff, "é"], ["1"]), named(255, [0xff, "é"], ["2"]))

  it(
    "gives each a distinct name of at most 255 bytes, cut at a whole character or escape, ending in .json",
    async () => {
      await using q = await tempQueue()
      const inbox = Buffer.from(`${join(q.root, "inbox")}/`)
      for (const [i, units] of inputs.entries()) {
        const raw = bytesOf(units)
        expect(raw.length).toBeGreaterThanOrEqual(250)
        expect(raw.length).toBeLessThanOrEqual(255)
        fs.writeFileSync(Buffer.concat([inbox, raw]), i % 2 === 0 ? ok(`long-${i}`) : `not json ${i}`)
      }
      const run = await consumeBounded(q.root, [], { timeoutMs: 30_000 })
      expect(run.signal).toBeNull()
      expect(run.stderr).not.toContain("msg=undecodable-name")
      expect(run.stderr).not.toContain("unexpected failure")
      expect(run.exitCode).toBe(0)
      expect(fs.readdirSync(join(q.root, "inbox"))).toEqual([])
      expect(fs.readdirSync(join(q.root, "processing"))).toEqual([])
      const ended = [
        ...fs.readdirSync(join(q.root, "done")).map((n) => ["done", n] as const),
        ...fs.readdirSync(join(q.root, "error")).map((n) => ["error", n] as const),
      ]
      expect(ended).toHaveLength(inputs.length)
      const seen = new Set<number>()
      for (const [dir, name] of ended) {
        const content = fs.readFileSync(join(q.root, dir, name), "utf8")
        const i = Number(/(?:long-|not json )(\d+)/.exec(content)?.[1])
        const units = inputs[i] as Unit[]
        seen.add(i)
        expect(dir).toBe(i % 2 === 0 ? "done" : "error")
        expect(name).not.toContain("\uFFFD")
        expect(Buffer.byteLength(name)).toBeLessThanOrEqual(255)
        expect(name.endsWith(".json")).toBe(true)
        const spelling = spellingOf(units)
        if (Buffer.byteLength(spelling) <= 255) {
          expect(name).toBe(spelling)
          continue
        }
        const stem = /^(.*)~\d+\.json$/.exec(name)?.[1] as string
        expect(stem).toBeDefined()
        // The stem is the spelling cut after a whole unit, as long as it can be.
        const cuts = units.slice(0, -1).map((_, n) => spellingOf(units.slice(0, n + 1)))
        expect(cuts).toContain(stem)
        const next = cuts[cuts.indexOf(stem) + 1] as string
        expect(Buffer.byteLength(name) - Buffer.byteLength(stem) + Buffer.byteLength(next)).toBeGreaterThan(255)
      }
      expect(seen.size).toBe(inputs.length)
      expect(new Set(ended.map(([, n]) => n)).size).toBe(inputs.length)
    },
    slow,
  )
})

describe("a producer still writing", () => {
  it(
    "leaves files younger than --min-age in inbox/ and takes the older ones",
    async () => {
      await using q = await tempQueue({ seed: { "old.json": ok("old"), "fresh.json": ok("fresh") } })
      const hourAgo = new Date(Date.now() - 3_600_000)
      fs.utimesSync(join(q.root, "inbox", "old.json"), hourAgo, hourAgo)
      const first = await consumeBounded(q.root, ["--min-age", "10m"])
      expect(first.exitCode).toBe(0)
      expect(queueListing(q.root)).toMatchObject({ inbox: ["fresh.json"], processing: [], done: ["old.json"] })
      expect(first.stderr).toContain(" too_young=1 ")
      // Once it has aged, the same command takes it.
      fs.utimesSync(join(q.root, "inbox", "fresh.json"), hourAgo, hourAgo)
      const second = await consumeBounded(q.root, ["--min-age", "10m"])
      expect(second.exitCode).toBe(0)
      expect(queueListing(q.root)).toMatchObject({ inbox: [], done: ["fresh.json", "old.json"] })
    },
    slow,
  )

  it(
    "judges a file whose mtime is in the future by its ctime, so a producer's fast clock cannot hold it back",
    async () => {
      await using q = await tempQueue({ seed: { "ahead.json": ok("ahead") } })
      const nextYear = new Date(Date.now() + 365 * 86_400_000)
      fs.utimesSync(join(q.root, "inbox", "ahead.json"), nextYear, nextYear)
      // Just set by utimes, the ctime is younger than --min-age: the file waits, like any other.
      const first = await consumeBounded(q.root, ["--min-age", "10m"])
      expect(first.exitCode).toBe(0)
      expect(queueListing(q.root)).toMatchObject({ inbox: ["ahead.json"], done: [] })
      expect(first.stderr).toContain(" too_young=1 ")
      // Once its ctime is older than --min-age, it is taken, a year before its mtime.
      await Bun.sleep(300)
      const second = await consumeBounded(q.root, ["--min-age", "200ms"])
      expect(second.exitCode).toBe(0)
      expect(queueListing(q.root)).toMatchObject({ inbox: [], processing: [], done: ["ahead.json"] })
    },
    slow,
  )

  it(
    "rejects a --min-age that is not a duration as a usage error",
    async () => {
      await using q = await tempQueue({ seed: { "a.json": ok("a") } })
      const run = await consumeBounded(q.root, ["--min-age", "soon"])
      expect(run.stderr).toContain("--min-age")
      expect(run.exitCode).toBe(2)
      expect(queueListing(q.root).inbox).toEqual(["a.json"])
    },
    slow,
  )
})

describe("bun run enqueue", () => {
  // The root script once (the first test), the bin file directly for the rest: half the processes.
  const enqueue = (args: readonly string[], stdin?: string, via: "script" | "bin" = "bin") =>
    run(
      [
        ...(via === "script" ? ["bun", "run", "enqueue"] : ["bun", join(repoRoot, "packages/consumer/bin/enqueue.ts")]),
        ...args,
      ],
      stdin === undefined ? {} : { stdin },
    )

  it(
    "puts files and stdin into inbox/ byte for byte through tmp/, and consume takes them",
    async () => {
      await using q = await tempQueue()
      const a = join(q.path, "from file.json")
      fs.writeFileSync(a, `\uFEFF${ok("enq-a")}`)
      const one = await enqueue(["--root", q.root, a], undefined, "script")
      expect(one.stdout).toBe("'from file.json'\n") // quoted for a shell, as every name in text output
      expect(one.exitCode).toBe(0)
      const two = await enqueue(["--root", q.root, "--name", "piped.json", "-"], ok("enq-b"))
      expect(two.stdout).toBe("piped.json\n")
      expect(two.exitCode).toBe(0)
      expect(queueListing(q.root).inbox).toEqual(["from file.json", "piped.json"])
      expect(fs.readFileSync(join(q.root, "inbox", "from file.json"))).toEqual(fs.readFileSync(a))
      expect(fs.readFileSync(join(q.root, "inbox", "piped.json"), "utf8")).toBe(ok("enq-b"))
      expect(fs.readdirSync(join(q.root, "tmp"))).toEqual([])
      expect((await consumeBounded(q.root)).exitCode).toBe(0)
      expect(queueListing(q.root).done).toEqual(["from file.json", "piped.json"])
    },
    slow,
  )

  it(
    "refuses with exit 1 and enqueues nothing when one name is already in inbox/",
    async () => {
      await using q = await tempQueue({ seed: { "taken.json": "original" } })
      const fresh = join(q.path, "fresh.json")
      const taken = join(q.path, "taken.json")
      fs.writeFileSync(fresh, ok("fresh"))
      fs.writeFileSync(taken, ok("taken"))
      const r = await enqueue(["--root", q.root, fresh, taken])
      expect(r.stdout).toBe("")
      expect(r.stderr).toContain("taken.json")
      expect(r.exitCode).toBe(1)
      expect(queueListing(q.root).inbox).toEqual(["taken.json"])
      expect(fs.readFileSync(join(q.root, "inbox", "taken.json"), "utf8")).toBe("original")
      expect(fs.readdirSync(join(q.root, "tmp"))).toEqual([])
    },
    slow,
  )

  it(
    "refuses a file or a --from directory holding one larger than any message consume can take, reading none of it",
    async () => {
      await using q = await tempQueue()
      const dir = join(q.path, "seed")
      fs.mkdirSync(dir)
      const big = join(dir, "big.json")
      // Sparse: 1 GiB and a byte, without writing them.
      fs.closeSync(fs.openSync(big, "w"))
      fs.truncateSync(big, 1024 ** 3 + 1)
      const r = await enqueue(["--root", q.root, big])
      expect(r.stderr).toBe(
        `enqueue: ${big} is 1073741825 bytes, larger than any message consume can take (at most 1 GiB, read whole into memory); nothing was enqueued\n`,
      )
      expect(r.exitCode).toBe(2)
      fs.writeFileSync(join(dir, "small.json"), ok("small"))
      const seeded = await run([
        "bun",
        join(repoRoot, "packages/consumer/bin/setup.ts"),
        "--root",
        q.root,
        "--from",
        dir,
      ])
      expect(seeded.stderr).toContain(`--from ${dir} holds big.json, which is 1073741825 bytes`)
      expect(seeded.exitCode).toBe(2)
      expect(queueListing(q.root).inbox).toEqual([])
      expect(fs.readdirSync(join(q.root, "tmp"))).toEqual([])
    },
    slow,
  )

  it.each([
    ["stdin without --name", ["-"]],
    ["a hidden name", ["--name", ".hidden.json", "-"]],
    ["a name not ending in .json", ["--name", "x.txt", "-"]],
    ["a name longer than a file name can be", ["--name", `${"n".repeat(251)}.json`, "-"]],
    ["--name with two inputs", ["--name", "x.json", "a.json", "b.json"]],
    ["no input at all", []],
    ["an input that does not exist", ["/nonexistent/spool/x.json"]],
  ])(
    "exits 2 and changes nothing for %s",
    async (_, args) => {
      await using q = await tempQueue()
      const r = await enqueue(["--root", q.root, ...args], "{}")
      expect(r.stdout).toBe("")
      expect(r.stderr).not.toBe("")
      expect(r.exitCode).toBe(2)
      expect(queueListing(q.root).inbox).toEqual([])
      expect(fs.readdirSync(join(q.root, "tmp"))).toEqual([])
    },
    slow,
  )

  it(
    "prints its usage for --help",
    async () => {
      const r = await enqueue(["--help"])
      expect(r.stdout).toContain("Usage: bun run enqueue")
      expect(r.stdout).toContain("tmp/")
      expect(r.exitCode).toBe(0)
    },
    slow,
  )
})

describe("the CSV parser these tests rely on", () => {
  it.each([
    [
      'a,b\n"c,d","e""f"\n',
      [
        ["a", "b"],
        ["c,d", 'e"f'],
      ],
    ],
    ['"x\ny",z\n', [["x\ny", "z"]]],
    ["a,\n", [["a", ""]]],
  ])("parses %j", (text, rows) => {
    expect(parseCsv(text)).toEqual(rows)
  })

  it.each(['a"b,c\n', '"open,c\n', '"x"y,c\n'])("refuses the malformed %j", (text) => {
    expect(() => parseCsv(text)).toThrow()
  })
})
