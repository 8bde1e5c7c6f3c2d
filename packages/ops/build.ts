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
# bun drops a -- that comes right after the script as its own: give it one, so that the
# user's (replay.sh -- -1.json) reaches the command.
case \${1-} in
  --) set -- -- "$@" ;;
esac
if [ -L "$0" ]; then
  # A symlink to this file: let bun resolve it, as plain sh has no readlink.
  exec bun -e 'await import(require("node:fs").realpathSync(process.argv[1]).replace(/\\.sh$/, ".js"))' "$0" "$@"
fi
exec bun "$here/${name}.js" "$@"
`
}

async function build(): Promise<number> {
  fs.mkdirSync(dist, { recursive: true })
  for (const name of commands) {
    // Built beside the target and renamed over it, so a test or cron job running the old
    // build never sees a missing or half-written file. --splitting puts what the command only
    // imports lazily (zx, for replay --match) in a chunk NAME-HASH.js, read only when needed:
    // bundled inline, zx's 400 KB cost every start about 15 ms of CPU.
    const js = join(dist, `${name}.js`)
    const tmp = join(dist, `.${name}.${process.pid}.tmp`)
    const r = await $({
      nothrow: true,
      quiet: true,
      cwd: here,
    })`bun build ${join("bin", `${name}.ts`)} --target=bun --minify --splitting --outdir ${tmp} --entry-naming [name].js --chunk-naming ${`${name}-[hash].js`}`
    if (r.exitCode !== 0) {
      fs.rmSync(tmp, { recursive: true, force: true })
      process.stderr.write(`build: bundling ${name} failed (exit ${r.exitCode}):\n${r.stderr}${r.stdout}`)
      return 1
    }
    // Chunks first (content-hashed names: an existing one has the same bytes), then the entry
    // that imports them; then the chunks no build references any more.
    const chunks = fs.readdirSync(tmp).filter((f) => f !== `${name}.js`)
    for (const c of chunks) fs.renameSync(join(tmp, c), join(dist, c))
    fs.renameSync(join(tmp, `${name}.js`), js)
    fs.rmSync(tmp, { recursive: true, force: true })
    for (const f of fs.readdirSync(dist))
      if (f.startsWith(`${name}-`) && f.endsWith(".js") && !chunks.includes(f)) fs.rmSync(join(dist, f))
    const sh = join(dist, `${name}.sh`)
    fs.writeFileSync(`${sh}.${process.pid}.tmp`, launcher(name), { mode: 0o755 })
    fs.chmodSync(`${sh}.${process.pid}.tmp`, 0o755)
    fs.renameSync(`${sh}.${process.pid}.tmp`, sh)
    process.stderr.write(`build: ${sh} -> ${name}.js (${fs.statSync(js).size} bytes)\n`)
  }
  return 0
}

/** Newest mtime of the files a build reads: ops' own sources, cli's and core's, and the root package.json (the version). */
function newestInput(): number {
  const cli = join(here, "..", "cli")
  const core = join(here, "..", "core")
  const roots = [
    join(here, "src"),
    join(here, "bin"),
    join(here, "build.ts"),
    join(here, "package.json"),
    join(here, "..", "..", "package.json"),
    join(cli, "src"),
    join(cli, "package.json"),
    join(core, "src"),
    join(core, "sql"),
    join(core, "package.json"),
  ]
  let newest = 0
  const walk = (p: string) => {
    const st = fs.statSync(p)
    newest = Math.max(newest, st.mtimeMs)
    if (st.isDirectory()) for (const e of fs.readdirSync(p)) walk(join(p, e))
  }
  for (const r of roots) walk(r)
  return newest
}

/** True when a dist file (or a chunk an entry imports) is missing or older than a source (so tests never run a stale build). */
export function isStale(): boolean {
  let oldest = Number.POSITIVE_INFINITY
  for (const name of commands) {
    for (const ext of ["js", "sh"]) {
      try {
        oldest = Math.min(oldest, fs.statSync(join(dist, `${name}.${ext}`)).mtimeMs)
      } catch {
        return true
      }
    }
    const entry = fs.readFileSync(join(dist, `${name}.js`), "utf8")
    for (const [, chunk] of entry.matchAll(/import\("\.\/([^"/]+\.js)"\)/g))
      if (chunk === undefined || !fs.existsSync(join(dist, chunk))) return true
  }
  return newestInput() > oldest
}

if (import.meta.main) {
  // --if-stale: build only when dist/ is missing or older than a source (used by the e2e tests).
  process.exitCode = process.argv.includes("--if-stale") && !isStale() ? 0 : await build()
}
