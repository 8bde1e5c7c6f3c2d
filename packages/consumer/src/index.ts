export { main as consume } from "./consume.ts"
export { main as orderCheck } from "./order-check.ts"
export { main as schema } from "./schema.ts"
export { bundledFixtures, main as setup } from "./setup.ts"
