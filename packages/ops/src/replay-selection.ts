// How replay and delete choose files of error/: the options turned into one Selection.
import { type ErrorClass, quoteName, SpoolError } from "@spool/core/engine"
import type { Selection } from "./replay-bulk.ts"

/** The classes --class takes. */
export const errorClasses = ["business", "format"] as const satisfies readonly ErrorClass[]

/** The selection options of replay and delete (delete has no --id nor --all). */
type SelectionValues = {
  readonly match?: readonly string[] | undefined
  readonly reason?: string | undefined
  readonly class?: string | undefined
  readonly id?: string | undefined
  readonly all?: boolean | undefined
}

/** Turns the options into one selection, or a usage error. */
export function parseSelection(
  values: SelectionValues,
  positionals: readonly string[],
  command: "replay" | "delete" = "replay",
): Selection {
  const chosen = [
    positionals.length > 0 ? "FILE" : undefined,
    values.match !== undefined ? "--match" : undefined,
    values.reason !== undefined ? "--reason" : undefined,
    values.class !== undefined ? "--class" : undefined,
    values.id !== undefined ? "--id" : undefined,
    values.all === true ? "--all" : undefined,
  ].filter((c) => c !== undefined)
  if (chosen.length === 0)
    throw new SpoolError(
      "usage",
      command === "replay"
        ? "missing FILE (the name of a file in error/), --match GLOB, --reason REASON, --class CLASS, --id MSG_ID or --all"
        : "missing FILE (the name of a file in error/, or deferred/NAME), --match GLOB, --reason REASON or --class CLASS",
    )
  if (chosen.length > 1)
    throw new SpoolError("usage", `give one way of choosing files, not ${chosen.join(" and ")} together`)
  if (values.match !== undefined) {
    for (const p of values.match)
      if (p === "" || p.includes("/") || p.includes("\0"))
        throw new SpoolError(
          "usage",
          `--match takes a glob of names directly in error/, without a path, not ${quoteName(p)}`,
        )
    return { kind: "match", patterns: values.match }
  }
  if (values.reason !== undefined) {
    if (values.reason === "") throw new SpoolError("usage", "--reason takes a failure reason such as missing-field")
    return { kind: "reason", reason: values.reason }
  }
  if (values.class !== undefined) {
    const errorClass = errorClasses.find((c) => c === values.class)
    if (errorClass === undefined) throw new SpoolError("usage", "--class takes business or format")
    return { kind: "class", errorClass }
  }
  if (values.id !== undefined) {
    if (values.id === "") throw new SpoolError("usage", "--id takes a message's msg_id")
    return { kind: "id", msgId: values.id }
  }
  if (values.all === true) return { kind: "all" }
  return { kind: "names", names: positionals }
}
