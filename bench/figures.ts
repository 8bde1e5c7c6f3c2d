// The statistics and number formats the bench's figures share.

/** Nearest-rank percentile; NaN for no values. */
export const percentile = (xs: readonly number[], p: number): number => {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] as number
}

export const median = (xs: readonly number[]): number => percentile(xs, 50)

export const fmt = (x: number, digits = 1): string => x.toFixed(digits)
