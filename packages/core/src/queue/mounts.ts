// Which directories are mount points of their own. Two directories on one filesystem can still
// be two mounts (a bind mount, a container volume per directory): rename(2) between them fails
// with EXDEV, as between filesystems, and the device numbers lstat gives cannot tell.
import fs from "node:fs"

/** The mount points of this process's mount namespace (empty where /proc is not there to say). */
export function mountPoints(): ReadonlySet<string> {
  let text: string
  try {
    text = fs.readFileSync("/proc/self/mountinfo", "utf8")
  } catch {
    return new Set()
  }
  // Field 5 is the mount point, with space, tab, newline and backslash written as \ooo.
  return new Set(
    text
      .split("\n")
      .map((line) => line.split(" ")[4])
      .filter((p): p is string => p !== undefined && p !== "")
      .map((p) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)))),
  )
}
