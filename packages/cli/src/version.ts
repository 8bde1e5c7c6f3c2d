// The root package.json is the one place spool's version is written; the built lag.sh and
// replay.sh carry the copy bundled into them when they were built.
import { version as rootVersion } from "../../../package.json"

/** spool's version, from the root package.json. */
export const version: string = rootVersion

/** What `--version` prints: `spool 0.1.0`. */
export function versionLine(): string {
  return `spool ${version}\n`
}
