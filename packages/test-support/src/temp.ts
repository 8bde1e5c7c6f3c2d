// Disposable temp directories and queue roots (`await using q = await tempQueue()`).
import fs from "node:fs"
import os from "node:os"
import { join } from "node:path"
import { fixturesDir } from "./repo.ts"

/** A temporary directory removed when disposed (`await using q = await tempDir()`). */
export interface TempDir extends AsyncDisposable {
  readonly path: string
}

export async function tempDir(prefix = "spool-test-"): Promise<TempDir> {
  const path = fs.mkdtempSync(join(os.tmpdir(), prefix))
  return {
    path,
    async [Symbol.asyncDispose]() {
      fs.rmSync(path, { recursive: true, force: true })
    },
  }
}

/** A temporary queue root with the four directories (and tmp/), optionally seeded. */
export interface TempQueue extends TempDir {
  readonly root: string
  /** Writes a file into inbox/ (raw bytes or a JSON value). */
  put(name: string, content: string | Uint8Array | object): void
}

export async function tempQueue(
  options: { seed?: "fixtures" | Record<string, string | object> } = {},
): Promise<TempQueue> {
  const dir = await tempDir()
  const root = join(dir.path, "q")
  for (const d of ["inbox", "processing", "done", "error", "deferred", "tmp"])
    fs.mkdirSync(join(root, d), { recursive: true })
  const put = (name: string, content: string | Uint8Array | object) => {
    const data = typeof content === "string" || content instanceof Uint8Array ? content : JSON.stringify(content)
    fs.writeFileSync(join(root, "inbox", name), data)
  }
  if (options.seed === "fixtures") {
    for (const e of fs.readdirSync(fixturesDir, { withFileTypes: true }))
      if (e.isFile() && e.name.endsWith(".json"))
        fs.copyFileSync(join(fixturesDir, e.name), join(root, "inbox", e.name))
  } else if (options.seed) {
    for (const [name, content] of Object.entries(options.seed)) put(name, content)
  }
  return { path: dir.path, root, put, [Symbol.asyncDispose]: dir[Symbol.asyncDispose] }
}
