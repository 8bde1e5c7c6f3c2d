// Where a path sits relative to queue roots: the root it is in (found the way git finds its
// repository), and whether it is one of a queue's own directories, where no queue belongs.
import fs from "node:fs"
import { basename, dirname, join, resolve } from "node:path"

// The directories that make a root recognisable; deferred/ is added by openQueue when missing.
const markers = ["inbox", "processing", "done", "error"] as const
const ownDirs = new Set(["inbox", "processing", "done", "error", "deferred", "tmp"])

/** Whether `dir` holds inbox/, processing/, done/ and error/ (openQueue then checks it fully). */
export function looksLikeRoot(dir: string): boolean {
  return markers.every((q) => isDirectory(join(dir, q)))
}

/** `dir` or its nearest ancestor that looks like a queue root. */
export function enclosingRoot(dir: string): string | undefined {
  for (let d = resolve(dir); ; d = dirname(d)) {
    if (looksLikeRoot(d)) return d
    if (dirname(d) === d) return undefined
  }
}

/** The queue whose own directory (inbox/, error/, tmp/, ...) `path` is or is under, if any. */
export function queueHolding(path: string): { readonly root: string; readonly dir: string } | undefined {
  for (let d = resolve(path); dirname(d) !== d; d = dirname(d))
    if (ownDirs.has(basename(d)) && looksLikeRoot(dirname(d))) return { root: dirname(d), dir: basename(d) }
  return undefined
}

/** What to say about a path that is inside a queue: which queue, which of its directories, and the root to use. */
export function insideQueuePhrase(path: string): string | undefined {
  const held = queueHolding(path)
  if (held === undefined) return undefined
  const where =
    held.dir === basename(resolve(path)) ? `the ${held.dir}/ directory` : `inside the ${held.dir}/ directory`
  return `${resolve(path)} is ${where} of the queue ${held.root}, not a queue root; use --root ${held.root}`
}

function isDirectory(path: string): boolean {
  return fs.statSync(path, { throwIfNoEntry: false })?.isDirectory() === true
}
