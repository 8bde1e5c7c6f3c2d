// Where the repository is, for tests that run its commands and read its fixtures.
import { join, resolve } from "node:path"

/** The repository root, three levels above this package's src/. */
export const repoRoot = resolve(import.meta.dir, "../../..")

/** The sample queue (`fixtures/`). */
export const fixturesDir = join(repoRoot, "fixtures")
