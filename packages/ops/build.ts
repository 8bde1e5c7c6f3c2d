#!/usr/bin/env bun
// Builds dist/lag.sh and dist/replay.sh: each command bundled and minified into dist/NAME.js,
// started by a POSIX sh launcher. The launcher cannot be the bundle itself: Bun runs any
// file named *.sh as a Bun Shell script. @spool/core is marked side-effect free, so the
// bundles hold only what the commands use (no arktype, no consumer): start-up stays near
// Bun's own. zx is not bundled: importing it costs 45-100 ms at every start.
import fs from "node:fs"
import { join } from "node:path"
import { $ } from "zx/core"

const here = import.meta.dir
const dist = join(here, "dist")
const commands = ["lag", "replay"] as const

/** The launcher: finds NAME.js next to the real script (through a symlink too) and execs bun on it. */
export function launcher(name: string): string {
  return `#!/bin/sh
# spool ${name}: runs ${name}.js (bundled from packages/ops) with bun. Built by packages/ops/build.ts.
# POSIX sh only: works as ./${name}.sh, sh ${name}.sh, from any directory and via a symlink,
# with nothing but bun on PATH.
case $0 in
  */*) here=\${0%/*} ;;
  *) here=. ;;
esac
case $here in
  /*) ;;
  *) here=./$here ;;
esac
if [ -L "$0" ]; then
  # A symlink to this file: let bun resolve it, as plain sh has no readlink.
  exec bun -e 'await import(require("node:fs").realpathSync(process.argv[1]).replace(/\\.sh$/, ".js"))' "$0" "$@"
fi
exec bun "$here/${name}.js" "$@"
`
}

async function build(): Promise<number> {
  fs.rmSync(dist, { recursive: true, force: true })
  fs.mkdirSync(dist, { recursive: true })
  for (const name of commands) {
    const r = await $({
      nothrow: true,
      quiet: true,
      cwd: here,
    })`bun build ${join("bin", `${name}.ts`)} --target=bun --minify --outfile ${join(dist, `${name}.js`)}`
    if (r.exitCode !== 0) {
      process.stderr.write(`build: bundling ${name} failed (exit ${r.exitCode}):\n${r.stderr}${r.stdout}`)
      return 1
    }
    const sh = join(dist, `${name}.sh`)
    fs.writeFileSync(sh, launcher(name), { mode: 0o755 })
    fs.chmodSync(sh, 0o755)
    process.stderr.write(`build: ${sh} -> ${name}.js (${fs.statSync(join(dist, `${name}.js`)).size} bytes)\n`)
  }
  return 0
}

if (import.meta.main) process.exitCode = await build()
