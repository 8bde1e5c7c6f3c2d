// A batch's columns as PostgreSQL array parameters, and its answers as one row.

/**
 * `values` as the text of a PostgreSQL array (`{"a","b",NULL,3}`), for a parameter cast to
 * `text[]` or `bigint[]`: every string quoted, `"` and `\` escaped, null as NULL. Built here in
 * one pass, it costs the client a fraction of the driver's own encoding of a JavaScript array,
 * element by element, on a path that sends a dozen arrays of a thousand values a batch.
 */
export function pgArray(values: readonly (string | number | null)[]): string {
  let out = "{"
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    if (i > 0) out += ","
    if (v === null || v === undefined) out += "NULL"
    else if (typeof v === "number") out += String(v)
    else if (v.includes('"') || v.includes("\\")) out += `"${v.replace(/[\\"]/g, "\\$&")}"`
    else out += `"${v}"`
  }
  return `${out}}`
}

/**
 * The values a set-wise statement returned for the rows it was given, from its one-row answer
 * `some`: NULL when it returned a value for every row given (the usual case: undefined here),
 * else the array of those it returned. The statements spell it
 * `CASE WHEN count(*) = <rows given> THEN NULL ELSE COALESCE(array_agg(x), '{}') END AS some`
 * over their RETURNING rows: a thousand-row result costs the client far more to receive than one.
 */
export function someOf(rows: readonly unknown[]): readonly string[] | undefined {
  return (rows[0] as { some: string[] | null } | undefined)?.some ?? undefined
}
