import { describe, expect, it } from "bun:test"
import { SpoolError } from "@spool/core/engine"
import { argsOf, operationOf } from "./operate.ts"

describe("a console form as the command's arguments", () => {
  it.each([
    ["replay", { file: "a.json" }, ["--", "a.json"]],
    ["replay", { scope: "selected", file: ["a.json", "-b.json"], dry: "1" }, ["--dry-run", "--", "a.json", "-b.json"]],
    ["replay", { scope: "all", dry: "1" }, ["--dry-run", "--all"]],
    ["replay", { scope: "reason", value: "parse" }, ["--reason", "parse"]],
    ["delete", { scope: "class", value: "format", dry: "1" }, ["--dry-run", "--class", "format"]],
    ["delete", { scope: "selected", file: "x.json" }, ["--", "x.json"]],
  ] as const)("%s %o runs with %o", (command, form, args) => {
    expect(argsOf(operationOf(command, form as Record<string, string | string[]>))).toEqual([...args])
  })

  it.each([
    ["compact", {}, "replays or deletes"],
    ["replay", { scope: "everything" }, "scope is selected, all, reason or class"],
    ["delete", { scope: "all" }, "delete takes no --all"],
    ["replay", { scope: "selected" }, "select at least one file"],
    ["replay", { scope: "reason", value: "" }, "give the reason"],
  ] as const)("refuses %s %o, saying %s", (command, form, says) => {
    expect(() => operationOf(command, form as Record<string, string>)).toThrow(SpoolError)
    expect(() => operationOf(command, form as Record<string, string>)).toThrow(says)
  })
})
