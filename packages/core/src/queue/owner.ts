import fs from "node:fs"
import { hostname } from "node:os"
import { bootIdOverride, machineIdOverride } from "../_fault.ts"

/** Who holds a claim: enough to tell, after a crash, whether that process still runs. */
export interface Owner {
  readonly ownerId: string
  readonly host: string
  readonly pid: number
  /**
   * The kernel's boot id, which changes on every boot, so a pid from before a reboot is never
   * mistaken for a live one; then, after a space, the owner's pid namespace, and after another
   * its machine's id (see ownerLiveness).
   */
  readonly bootId: string
  /** Start time of the process in clock ticks since boot: survives pid reuse. */
  readonly startTicks: string
}

/** Whether an owner is alive, dead, or cannot be judged from this host. */
type Liveness = "alive" | "dead" | "unknown"

const readText = (path: string): string | undefined => {
  try {
    return fs.readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

const thisBoot = (bootIdOverride ?? readText("/proc/sys/kernel/random/boot_id") ?? "no-boot-id").trim()
/** `pid:[4026531836]`: which pid numbers this process sees; containers have their own. */
const thisPidNamespace = (() => {
  try {
    return fs.readlinkSync("/proc/self/ns/pid")
  } catch {
    return undefined
  }
})()
/** /etc/machine-id: the same across reboots, and (unlike the host name) one per installed machine. */
const thisMachine = (machineIdOverride ?? readText("/etc/machine-id") ?? "").trim() || undefined
const thisBootId = [thisBoot, thisPidNamespace ?? "-", ...(thisMachine === undefined ? [] : [thisMachine])].join(" ")
const thisHost = hostname()

/** The start time (field 22 of /proc/PID/stat) of a process, or undefined when it is gone. */
export function processStartTicks(pid: number): string | undefined {
  return processStat(pid)?.startTicks
}

/** The state letter (field 3) and start time (field 22) of a process from /proc/PID/stat. */
function processStat(pid: number): { state: string; startTicks: string | undefined } | undefined {
  const stat = readText(`/proc/${pid}/stat`)
  if (stat === undefined) return undefined
  // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return { state: fields[0] ?? "", startTicks: fields[19] }
}

/** The identity of the running process as a claim owner. */
export function currentOwner(): Owner {
  return {
    ownerId: crypto.randomUUID().replaceAll("-", "").slice(0, 16),
    host: thisHost,
    pid: process.pid,
    bootId: thisBootId,
    startTicks: processStartTicks(process.pid) ?? "0",
  }
}

// The owners of this process whose run is under way. Another owner of this very process is a
// run that ended (a library drain that failed and handed back what it could): its claims are
// abandoned, and the next drain of the process adopts them instead of waiting for a restart.
const runningHere = new Set<string>()

/** Marks `ownerId` (an owner of this process) running until the returned function is called. */
export function holdOwner(ownerId: string): () => void {
  runningHere.add(ownerId)
  return () => runningHere.delete(ownerId)
}

/**
 * Judges an owner from this host: dead if the host and boot match and the pid is gone, was
 * reused (different start time) or is a zombie, or is this process and the owner's run has
 * ended; unknown for another host, another machine of the same host name or another pid namespace,
 * which only its heartbeat can tell about.
 */
export function ownerLiveness(owner: Owner): Liveness {
  if (owner.host !== thisHost) return "unknown"
  const [boot, pidNamespace, machine] = owner.bootId.split(" ")
  // Two machines can share a host name (VMs cloned from one image): another machine's owner is
  // judged by its heartbeat, as one on another host, or each would take the other's claims as
  // those of a machine that rebooted. (An owner recorded without a machine id, by an older
  // spool or on a system without /etc/machine-id, is judged as before.)
  if (machine !== undefined && thisMachine !== undefined && machine !== thisMachine) return "unknown"
  if (boot !== thisBoot) return "dead"
  // Containers on one kernel share its boot id, and may share a hostname (host networking, a
  // set --hostname), but each has its own pid numbers: another namespace's pid says nothing
  // here, so such an owner is judged by its heartbeat, like one on another host. (An owner
  // recorded without a namespace, by an older spool, is judged as before.)
  if (pidNamespace !== undefined && pidNamespace !== "-" && pidNamespace !== thisPidNamespace) return "unknown"
  const stat = processStat(owner.pid)
  if (stat === undefined || stat.startTicks !== owner.startTicks) return "dead"
  // A zombie (Z) or dying (X) process holds nothing: it only waits for its parent to reap it.
  if (stat.state === "Z" || stat.state === "X") return "dead"
  return owner.pid !== process.pid || runningHere.has(owner.ownerId) ? "alive" : "dead"
}
