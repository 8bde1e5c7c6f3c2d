/** The one candidate `word` is most likely a typo of (at most two edits away), or undefined. */
export function suggestion(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined
  let bestDistance = 3
  for (const c of candidates) {
    const d = distance(word, c)
    if (d < bestDistance) {
      best = c
      bestDistance = d
    }
  }
  return bestDistance <= Math.min(2, Math.floor(word.length / 2)) ? best : undefined
}

/** Levenshtein distance. */
function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++)
      current[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (current[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      )
    previous = current
  }
  return previous[b.length] ?? 0
}
