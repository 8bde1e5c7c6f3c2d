// End to end: a queue directory that is a symbolic link makes every command that opens the
// root refuse with exit 2, naming the link and its target, before it touches anything inside
// the root or outside it. The root itself may be a link.
import { beforeAll, describe, expect, it } from "bun:test"
import fs from "node:fs"
import { join, relative } from "node:path"
import { repoRoot, run, spool, type TempDir, tempDir } from "@spool/test-support"

beforeAll(async () => {
  const r = await run(["bun", join(repoRoot, "packages/ops/build.ts"), "--if-stale"])
  expect(r.exitCode).toBe(0)
}, 120_000)

const ok = (id: string) => JSON.stringify({ msg_id: id, order_no: "o-1", seq: 1, amount: 1 })
const bin = (command: string) => join(repoRoot, "packages/consumer/bin", `${command}.ts`)

/** Every entry under `dir`, links not followed: relative path -> file bytes, link target or "dir". */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (d: string) => {
    for (const name of fs.readdirSync(d).sort()) {
      const p = join(d, name)
      const st = fs.lstatSync(p)
      const key = relative(dir, p)
      if (st.isSymbolicLink()) out[key] = `-> ${fs.readlinkSync(p)}`
      else if (st.isDirectory()) {
        out[key] = "dir"
        walk(p)
      } else out[key] = fs.readFileSync(p, "utf8")
    }
  }
  walk(dir)
  return out
}

interface LinkedQueue extends TempDir {
  readonly root: string
  readonly outside: string
}

/**
 * A queue whose `linked` directory is a symbolic link to a directory outside the root. inbox/
 * (or, when inbox/ is the link, the outside directory) holds a valid and a broken message; the
 * outside directory also holds a message that replay would take.
 */
async function linkedQueue(linked: "inbox" | "processing" | "done" | "error" | "tmp"): Promise<LinkedQueue> {
  const t = await tempDir("spool-links-")
  const root = join(t.path, "q")
  const outside = join(t.path, "outside")
  for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(root, d), { recursive: true })
  fs.mkdirSync(outside)
  fs.writeFileSync(join(outside, "sentinel.json"), "{broken")
  fs.rmSync(join(root, linked), { recursive: true })
  fs.symlinkSync(outside, join(root, linked))
  fs.writeFileSync(join(root, "inbox", "good.json"), ok("m-1"))
  fs.writeFileSync(join(root, "inbox", "bad.json"), "{broken")
  return Object.assign(t, { root, outside })
}

function expectRefusal(r: { stdout: string; stderr: string; exitCode: number }, q: LinkedQueue, linked: string): void {
  expect(r.stdout).toBe("")
  expect(r.stderr).toContain(`${q.root} is not a queue: ${join(q.root, linked)} is a symbolic link to ${q.outside}`)
  expect(r.stderr).toContain(
    `Replace the link with a real directory on the root's filesystem: rm ${join(q.root, linked)}`,
  )
  expect(r.exitCode).toBe(2)
}

describe("consume on a root with a linked queue directory", () => {
  it("refuses error/ linked outside: the broken message stays in inbox/, the outside directory keeps its sentinel", async () => {
    await using q = await linkedQueue("error")
    const before = { root: tree(q.root), outside: tree(q.outside) }
    const r = await spool("consume", ["--root", q.root])
    expectRefusal(r, q, "error")
    expect(tree(q.outside)).toEqual({ "sentinel.json": "{broken" })
    expect(tree(q.root)).toEqual(before.root)
    expect(fs.existsSync(join(q.root, "ledger.db"))).toBe(false)
  })

  it("refuses inbox/ linked outside: the outside directory is not drained", async () => {
    await using q = await linkedQueue("inbox")
    const before = tree(q.outside)
    expect(Object.keys(before).sort()).toEqual(["bad.json", "good.json", "sentinel.json"])
    const r = await spool("consume", ["--root", q.root])
    expectRefusal(r, q, "inbox")
    expect(tree(q.outside)).toEqual(before)
    expect(tree(q.root)).toEqual({ done: "dir", error: "dir", inbox: `-> ${q.outside}`, processing: "dir", tmp: "dir" })
  })

  it.each(["processing", "done", "tmp"] as const)("refuses %s/ linked outside and changes nothing", async (linked) => {
    await using q = await linkedQueue(linked)
    const before = { root: tree(q.root), outside: tree(q.outside) }
    const r = await spool("consume", ["--root", q.root, "--watch"])
    expectRefusal(r, q, linked)
    expect({ root: tree(q.root), outside: tree(q.outside) }).toEqual(before)
  })
})

// Every other command that opens a root, with error/ linked to a directory holding a file
// that replay would move back and lag would count.
const commands: readonly [string, (root: string, outside: string) => string[]][] = [
  ["setup", (root) => ["bun", bin("setup"), "--root", root]],
  ["enqueue", (root, outside) => ["bun", bin("enqueue"), "--root", root, join(outside, "sentinel.json")]],
  ["schema", (root) => ["bun", bin("schema"), "--root", root]],
  ["order-check", (root) => ["bun", bin("order-check"), "--root", root]],
  ["stats", (root) => ["bun", bin("stats"), "--root", root]],
  ["compact", (root) => ["bun", bin("compact"), "--root", root, "--older-than", "0s", "--delete"]],
  ["bun scripts/lag.ts", (root) => ["bun", join(repoRoot, "scripts/lag.ts"), root, "0"]],
  ["dist/lag.sh", (root) => [join(repoRoot, "packages/ops/dist/lag.sh"), root, "0", "--json"]],
  [
    "bun scripts/replay.ts FILE",
    (root) => ["bun", join(repoRoot, "scripts/replay.ts"), "--root", root, "sentinel.json"],
  ],
  ["dist/replay.sh --all", (root) => [join(repoRoot, "packages/ops/dist/replay.sh"), "--root", root, "--all"]],
]

describe.each(commands)("%s on a root whose error/ is a link", (_name, argv) => {
  it("exits 2 naming the link, and changes nothing inside the root or outside it", async () => {
    await using q = await linkedQueue("error")
    const before = { root: tree(q.root), outside: tree(q.outside) }
    const r = await run(argv(q.root, q.outside))
    expectRefusal(r, q, "error")
    expect({ root: tree(q.root), outside: tree(q.outside) }).toEqual(before)
  })
})

describe("a root that is itself a symbolic link", () => {
  it("is the operator's choice: consume, lag and replay work through it", async () => {
    await using t = await tempDir("spool-links-")
    const real = join(t.path, "real")
    for (const d of ["inbox", "processing", "done", "error", "tmp"]) fs.mkdirSync(join(real, d), { recursive: true })
    fs.writeFileSync(join(real, "inbox", "good.json"), ok("m-1"))
    fs.writeFileSync(join(real, "inbox", "bad.json"), "{broken")
    const link = join(t.path, "link")
    fs.symlinkSync(real, link)
    const consumed = await spool("consume", ["--root", link])
    expect(consumed.exitCode).toBe(0)
    expect(fs.readdirSync(join(real, "done"))).toEqual(["good.json"])
    expect(fs.readdirSync(join(real, "error"))).toEqual(["bad.json"])
    const lag = await run(["bun", join(repoRoot, "scripts/lag.ts"), link, "0"])
    expect(lag.stdout).toBe("inbox=0 processing=0 error=1\n")
    expect(lag.exitCode).toBe(0)
    // Corrected in error/ first, as an operator would: the bytes that failed would only fail again.
    fs.appendFileSync(join(real, "error", "bad.json"), "\n")
    const replay = await run(["bun", join(repoRoot, "scripts/replay.ts"), "--root", link, "bad.json"])
    expect(replay.exitCode).toBe(0)
    expect(fs.readdirSync(join(real, "inbox"))).toEqual(["bad.json"])
  })
})
