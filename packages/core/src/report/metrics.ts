// The Prometheus text exposition format (version 0.0.4), as the node_exporter textfile
// collector and a scrape read it: one writer for every command that exports metrics.
import { resolve } from "node:path"
import { SpoolError } from "../errors.ts"
import { writeFileAtomic } from "../queue/atomic-write.ts"

/** A sample's labels, in the order written. */
type Labels = Readonly<Record<string, string>>

/** Metric families, written in the order they were added. */
export class Exposition {
  readonly #lines: string[] = []

  /** A counter: a total that only grows (a reset, such as a pruned ledger, reads as a restart). */
  counter(name: string, help: string, samples: readonly (readonly [Labels, number])[]): this {
    return this.#family(name, "counter", help, samples)
  }

  /** A gauge: a value that goes up and down. */
  gauge(name: string, help: string, samples: readonly (readonly [Labels, number])[]): this {
    return this.#family(name, "gauge", help, samples)
  }

  /** The exposition text, ending in a newline. */
  text(): string {
    return `${this.#lines.join("\n")}\n`
  }

  #family(name: string, type: string, help: string, samples: readonly (readonly [Labels, number])[]): this {
    this.#lines.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`)
    for (const [labels, value] of samples) {
      const l = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`)
      this.#lines.push(`${name}${l.length > 0 ? `{${l.join(",")}}` : ""} ${formatNumber(value)}`)
    }
    return this
  }
}

/** A label value with its backslashes, quotes and line breaks escaped. */
export function escapeLabel(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n")
}

function escapeHelp(text: string): string {
  return text.replaceAll("\\", "\\\\").replaceAll("\n", "\\n")
}

/** A sample value: infinities and NaN as the format spells them. */
export function formatNumber(n: number): string {
  return Number.isFinite(n) ? String(n) : n > 0 ? "+Inf" : n < 0 ? "-Inf" : "NaN"
}

/**
 * Writes metrics for the node_exporter textfile collector, atomically. The collector reads only
 * *.prom files, and writeFileAtomic's temp name does not end in .prom, so it never sees a
 * half-written file.
 */
export function writeTextfile(path: string, text: string): void {
  try {
    writeFileAtomic(resolve(path), text)
  } catch (error) {
    if (error instanceof SpoolError) throw error
    throw new SpoolError("io", `cannot write ${path}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    })
  }
}
