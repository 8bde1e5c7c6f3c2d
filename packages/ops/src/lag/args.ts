// Which root and THRESHOLD a lag command line names. lag finds its root as every command does
// (--root, $SPOOL_ROOT, the enclosing queue root, ./spool) and keeps the lab's `lag.sh DIR
// THRESHOLD`: a lone whole number is THRESHOLD, anything else DIR.
import { resolve } from "node:path"
import { openQueue, type Queue, resolveRoot, SpoolError } from "@spool/core/engine"

/** The queue and the THRESHOLD text (if any) of a lag command line. */
export interface LagTarget {
  readonly queue: Queue
  readonly threshold: string | undefined
}

const wholeNumber = /^-?[0-9]+(\.[0-9]*)?$/

/**
 * Reads the positionals: `DIR THRESHOLD`, `THRESHOLD` or `DIR` alone, or nothing; with `--root`
 * only THRESHOLD. `isPlugin`: no THRESHOLD at all, so one positional is DIR.
 */
export function lagTarget(
  rootOption: string | undefined,
  positionals: readonly string[],
  isPlugin: boolean,
): LagTarget {
  const [first, second, ...extra] = positionals
  const unexpected = (text: string) =>
    new SpoolError(
      "usage",
      isPlugin
        ? `unexpected argument ${JSON.stringify(text)}: as a plugin lag takes DIR and --warning/--critical, not THRESHOLD`
        : `unexpected argument ${JSON.stringify(text)}`,
    )
  if (extra[0] !== undefined) throw unexpected(extra[0])
  if (first === "") throw new SpoolError("usage", "DIR is empty; give the queue root, or --root DIR")
  let dir: string | undefined
  let threshold: string | undefined
  if (rootOption !== undefined) {
    if (isPlugin ? first !== undefined : second !== undefined)
      throw new SpoolError(
        "usage",
        `--root ${rootOption} and DIR ${JSON.stringify(first)} both name the root; give one of them`,
      )
    threshold = isPlugin ? undefined : first
  } else if (isPlugin) {
    if (second !== undefined) throw unexpected(second)
    dir = first
  } else if (second !== undefined) {
    dir = first
    threshold = second
  } else if (first !== undefined && wholeNumber.test(first)) threshold = first
  else dir = first
  return { queue: openQueue(dir === undefined ? resolveRoot(rootOption) : resolve(dir)), threshold }
}
