export type { CommandSpec } from "./command.ts"
export { helpText, parseBytes, parseDuration, parseInteger, runCommand } from "./command.ts"
