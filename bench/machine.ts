// The description of the machine and the code measured that every results file carries:
// figures from different machines, loads or commits are only comparable with it.
import { Database } from "bun:sqlite"
import os from "node:os"
import { repo, sh } from "./shell.ts"

/** The checked-out commit, with "-dirty" for uncommitted changes; "unknown" outside a git checkout. */
function commitMeasured(): string {
  try {
    const head = sh("git", ["-C", repo, "rev-parse", "--short", "HEAD"]).trim()
    const isDirty = sh("git", ["-C", repo, "status", "--porcelain", "--untracked-files=no"]).trim() !== ""
    return `${head}${isDirty ? "-dirty" : ""}`
  } catch {
    return "unknown"
  }
}

/** This machine, with the filesystem that holds `dir` (where the generated queues live). */
export function describeMachine(dir: string) {
  const fsLine = sh("df", ["-T", dir]).trim().split("\n").pop()?.split(/\s+/) ?? []
  return {
    nproc: os.availableParallelism(),
    cpu: os.cpus()[0]?.model ?? "unknown",
    memoryMb: Math.round(os.totalmem() / 2 ** 20),
    filesystem: `${fsLine[1]} on ${fsLine[0]} (${fsLine[6]})`,
    kernel: os.release(),
    /** The code measured: the commit, marked dirty when the work tree had uncommitted changes. */
    commit: commitMeasured(),
    /** 1-minute load average when the bench started: other work on the machine skews every figure. */
    loadAtStart: os.loadavg()[0] ?? 0,
    bun: Bun.version,
    // The floor links the system SQLite; bun:sqlite embeds its own.
    sqliteFloor: sh("sqlite3", ["--version"]).split(" ")[0],
    sqliteBun: (new Database(":memory:").query("SELECT sqlite_version() AS v").get() as { v: string }).v,
    /** JavaScriptCore settings passed down to every contender (BUN_JSC_*), when any is set. */
    jscOptions: Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("BUN_JSC_"))),
  }
}

export type Machine = ReturnType<typeof describeMachine>
