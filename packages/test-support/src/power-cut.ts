// The power-cut file system (native/power-cut-fs.c, whose header states its durability model):
// built from source on first use, mounted over a backing directory, its power cut, unmounted.
import fs from "node:fs"
import net from "node:net"
import { join } from "node:path"
import { repoRoot } from "./repo.ts"

const source = join(repoRoot, "packages/test-support/native/power-cut-fs.c")
const buildDir = join(repoRoot, "packages/test-support/.build")

/** The output of a command, or why it could not run. */
function output(cmd: string[]): { ok: boolean; text: string } {
  try {
    const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" })
    return { ok: r.exitCode === 0, text: `${r.stdout.toString()}${r.stderr.toString()}`.trim() }
  } catch (error) {
    return { ok: false, text: String(error) }
  }
}

let built: string | undefined

/**
 * Compiles the power-cut file system (cc with libfuse3, found by pkg-config) unless this very
 * source was compiled already, and returns the program's path. Throws with the compiler's words.
 */
export function buildPowerCutFs(): string {
  if (built !== undefined) return built
  const flags = output(["pkg-config", "--cflags", "--libs", "fuse3"])
  if (!flags.ok) throw new Error(`pkg-config finds no fuse3 (apt-get install libfuse3-dev pkg-config): ${flags.text}`)
  const hash = new Bun.CryptoHasher("sha256").update(fs.readFileSync(source)).update(flags.text).digest("hex")
  const program = join(buildDir, `power-cut-fs-${hash.slice(0, 16)}`)
  if (!fs.existsSync(program)) {
    fs.mkdirSync(buildDir, { recursive: true })
    // Compiled under a name of its own and renamed: test files built in parallel never run a half-written program.
    const tmp = `${program}.${process.pid}.tmp`
    const cc = output(["cc", "-O2", "-Wall", "-o", tmp, source, ...flags.text.split(/\s+/)])
    if (!cc.ok) throw new Error(`cannot compile ${source}: ${cc.text}`)
    fs.renameSync(tmp, program)
  }
  built = program
  return program
}

let unavailable: Promise<string | undefined> | undefined

/**
 * Why no power-cut file system can be mounted here (no /dev/fuse, no fusermount3, no compiler
 * or libfuse3, a mount the kernel refuses: the exact error), or undefined when one can.
 */
export function powerCutUnavailable(): Promise<string | undefined> {
  unavailable ??= (async () => {
    if (!fs.existsSync("/dev/fuse")) return "/dev/fuse is absent (the machine or container offers no FUSE)"
    if (Bun.which("fusermount3") === null) return "fusermount3 is not installed (apt-get install fuse3)"
    if (Bun.which("cc") === null) return "no C compiler, cc (apt-get install gcc)"
    const dir = fs.mkdtempSync(join(process.env.TMPDIR ?? "/tmp", "spool-power-cut-probe-"))
    try {
      fs.mkdirSync(join(dir, "backing"))
      await using m = await mountPowerCut(join(dir, "backing"), dir)
      fs.writeFileSync(join(m.root, "probe"), "probe")
      await m.unmount()
      return undefined
    } catch (error) {
      return `the power-cut file system cannot be mounted: ${error instanceof Error ? error.message : String(error)}`
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })()
  return unavailable
}

/** One change to the queue's directories a cut undid (lost) or left (kept). */
export interface CutChange {
  readonly kind: "create" | "remove" | "rename"
  readonly from: string
  readonly to?: string
}

/** What a power cut threw away and what it kept. */
export interface CutReport {
  readonly lost: readonly CutChange[]
  readonly kept: readonly CutChange[]
  /** Every change, lost or kept, in the order the file system saw them. */
  readonly journal: readonly (CutChange & { readonly isLost: boolean })[]
  /** Each file with unsynced writes: how many of them the cut undid. */
  readonly data: readonly { readonly path: string; readonly lost: number; readonly of: number }[]
}

/** Which unsynced changes a cut throws away: all of them, or a seeded random part (see power-cut-fs.c). */
export type CutMode = { readonly kind: "all" } | { readonly kind: "subset"; readonly seed: number }

/** A mounted power-cut file system. */
export interface PowerCutMount extends AsyncDisposable {
  /** The mount point: the directory the processes under test use. */
  readonly root: string
  /** Cuts the power: the backing directory keeps only what was durable. Every process using the mount must be dead. */
  cut(mode: CutMode): Promise<CutReport>
  /** Unmounts (after a cut, or to end cleanly) and waits for the file system's process to end. */
  unmount(): Promise<void>
}

/**
 * Mounts the power-cut file system over `backing` in `state/mnt` (`state`: a scratch directory
 * on the same file system as `backing`, for the removed entries and the control socket).
 */
export async function mountPowerCut(backing: string, state: string): Promise<PowerCutMount> {
  const program = buildPowerCutFs()
  const root = join(state, "mnt")
  const control = join(state, "control.sock")
  fs.mkdirSync(root, { recursive: true })
  const proc = Bun.spawn([program, backing, state, control, root], { stdout: "pipe", stderr: "pipe", stdin: "ignore" })
  const stderr = new Response(proc.stderr).text()
  const reader = proc.stdout.getReader()
  let said = ""
  // "mounted" comes from the file system's init, which runs once the kernel has mounted it.
  const mounted = (async () => {
    while (!said.includes("mounted\n")) {
      const { done, value } = await reader.read()
      if (done) return false
      said += new TextDecoder().decode(value)
    }
    return true
  })()
  const timeout = Bun.sleep(30_000).then(() => "timeout" as const)
  const ready = await Promise.race([mounted, timeout])
  if (ready !== true) {
    proc.kill("SIGKILL")
    await proc.exited
    output(["fusermount3", "-u", "-z", root])
    throw new Error(
      `power-cut-fs ${ready === "timeout" ? "did not mount within 30 s" : `exited ${proc.exitCode}`}: ${(await stderr).trim()}`,
    )
  }
  let isMounted = true
  const unmount = async () => {
    if (!isMounted) return
    // A process killed a moment ago may still hold the mount: retry for a while, then detach it.
    for (let i = 0; i < 50 && isMounted; i++) {
      if (output(["fusermount3", "-u", root]).ok) isMounted = false
      else await Bun.sleep(100)
    }
    if (isMounted) output(["fusermount3", "-u", "-z", root])
    isMounted = false
    const ended = await Promise.race([proc.exited, Bun.sleep(10_000).then(() => undefined)])
    if (ended === undefined) proc.kill("SIGKILL")
    await proc.exited
  }
  return {
    root,
    cut: async (mode) => {
      const answer = await ask(control, mode.kind === "all" ? "cut all" : `cut subset ${mode.seed}`)
      return parseReport(answer)
    },
    unmount,
    async [Symbol.asyncDispose]() {
      await unmount()
    },
  }
}

/** Sends one command on the control socket and returns the answer, up to its "done" line. */
function ask(control: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = ""
    const socket = net.createConnection(control, () => socket.write(`${command}\n`))
    socket.setEncoding("utf8")
    socket.on("data", (chunk) => {
      answer += chunk
    })
    socket.on("error", reject)
    socket.on("close", () =>
      answer.endsWith("done\n") ? resolve(answer) : reject(new Error(`power-cut-fs answered ${command}: ${answer}`)),
    )
  })
}

function parseReport(answer: string): CutReport {
  const lost: CutChange[] = []
  const kept: CutChange[] = []
  const journal: (CutChange & { isLost: boolean })[] = []
  const data: { path: string; lost: number; of: number }[] = []
  for (const line of answer.split("\n")) {
    const [word, ...rest] = line.split("\t")
    if (word === "lost" || word === "kept") {
      const [kind, from = "", to] = rest as [CutChange["kind"], string?, string?]
      const change = { kind, from, ...(to !== undefined && { to }) }
      ;(word === "lost" ? lost : kept).push(change)
      journal.push({ ...change, isLost: word === "lost" })
    } else if (word === "data") {
      const [n = 0, of = 0] = (rest[1] ?? "0/0").split("/").map(Number)
      data.push({ path: rest[0] ?? "", lost: n, of })
    } else if (word === "errors" && rest[0] !== "0")
      throw new Error(`power-cut-fs could not undo everything a cut loses: ${answer}`)
    else if (line.startsWith("error ")) throw new Error(`power-cut-fs: ${line}`)
  }
  return { lost, kept, journal, data }
}
