/** A progress bar on a terminal; every method is a no-op when it is not shown. */
export interface Progress {
  /** Records how many files are finished so far and redraws (at most every `intervalMs`). */
  update(done: number): void
  /** Writes a log line above the bar, so the two never share a line. */
  write(line: string): void
  /** Clears the bar for good. */
  finish(): void
}

/** The output a progress bar draws on: a TTY stream such as process.stderr. */
export interface ProgressStream {
  write(text: string): unknown
  readonly columns?: number
}

export interface ProgressOptions {
  readonly total: number
  readonly stream: ProgressStream
  readonly color: boolean
  readonly label?: string
  readonly intervalMs?: number
  readonly now?: () => number
}

/** A progress display that draws nothing and passes log lines straight through. */
export function noProgress(write: (line: string) => void): Progress {
  return { update() {}, write, finish() {} }
}

/**
 * A progress bar with rate and ETA, redrawn in place on one line. The first update always
 * draws, later ones at most every `intervalMs`.
 */
export function createProgress(o: ProgressOptions): Progress {
  const now = o.now ?? (() => performance.now())
  const started = now()
  const intervalMs = o.intervalMs ?? 100
  let done = 0
  let lastDraw = Number.NEGATIVE_INFINITY
  let isShown = false
  let isFinished = false
  const frame = () =>
    formatProgress({
      label: o.label ?? "consume",
      done,
      total: Math.max(o.total, done),
      elapsedMs: now() - started,
      // A pseudo-terminal nobody sized (script, CI) reports 0 columns.
      width: o.stream.columns || 80,
      color: o.color,
    })
  const draw = () => {
    o.stream.write(`\r${frame()}\x1b[K`)
    isShown = true
    lastDraw = now()
  }
  return {
    update(n) {
      if (isFinished) return
      done = n
      if (now() - lastDraw >= intervalMs) draw()
    },
    write(line) {
      if (!isShown) {
        o.stream.write(line)
        return
      }
      o.stream.write(`\r\x1b[K${line}`)
      draw()
    },
    finish() {
      if (isShown) o.stream.write("\r\x1b[K")
      isShown = false
      isFinished = true
    },
  }
}

export interface ProgressFrame {
  readonly label: string
  readonly done: number
  readonly total: number
  readonly elapsedMs: number
  /** Terminal columns; the bar shrinks to fit and the frame never reaches the last column. */
  readonly width: number
  readonly color: boolean
}

/** One line of the bar: `consume [#####-----] 500/1000  50%  250 files/s  ETA 2s`. */
export function formatProgress(f: ProgressFrame): string {
  const fraction = f.total > 0 ? Math.min(1, f.done / f.total) : 1
  const rate = f.elapsedMs > 0 ? (f.done * 1000) / f.elapsedMs : 0
  const eta = rate > 0 ? formatDuration(((f.total - f.done) / rate) * 1000) : "--"
  const percent = `${Math.floor(fraction * 100)}%`.padStart(4)
  const count = `${f.done}/${f.total}`
  const tail = ` ${count} ${percent}  ${formatRate(rate)} files/s  ETA ${eta}`
  const room = f.width - 1 - f.label.length - 3 - tail.length
  if (room < 10) return `${f.label}${tail}`.slice(0, Math.max(0, f.width - 1))
  const barWidth = Math.min(40, room)
  const filled = Math.round(fraction * barWidth)
  const bar = f.color
    ? `\x1b[32m${"█".repeat(filled)}\x1b[2m${"░".repeat(barWidth - filled)}\x1b[22m\x1b[39m`
    : `${"#".repeat(filled)}${"-".repeat(barWidth - filled)}`
  return `${f.label} [${bar}]${tail}`
}

function formatRate(rate: number): string {
  if (rate >= 100) return String(Math.round(rate))
  return rate.toFixed(1)
}

/** A short duration for an ETA: `42s`, `3m05s`, `2h07m`. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.ceil(ms / 1000))
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}m${String(s % 60).padStart(2, "0")}s`
  const h = Math.floor(m / 60)
  return `${h}h${String(m % 60).padStart(2, "0")}m`
}
