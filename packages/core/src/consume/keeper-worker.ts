// The keeper thread (see keeper.ts): loads the source's keeper module, and every `everyMs` keeps
// every batch in hand alive through it, whatever the main thread is doing. It decides nothing: a
// failure is reported to the main thread, which logs it and keeps the batch alive itself.
import type { Keeper, KeeperModule } from "../source/port.ts"
import type { KeeperReport, KeeperRequest } from "./keeper.ts"

declare const self: Worker

const held = new Map<number, readonly string[]>()
let keeper: Promise<Keeper> | undefined
/** The keeper once open: until then a round has nothing to send with. */
let opened: Keeper | undefined
let timer: ReturnType<typeof setInterval> | undefined
let isKeeping = false

const report = (r: KeeperReport) => self.postMessage(r)

self.onmessage = (event: MessageEvent<KeeperRequest>) => {
  const request = event.data
  if (request.op === "open") {
    keeper = (import(request.module) as Promise<KeeperModule>).then((m) => m.openKeeper(request.options))
    keeper.then(
      (k) => {
        opened = k
        report({ op: "ready" })
      },
      (error: unknown) => {
        clearInterval(timer)
        report({ op: "failed", isFatal: true, error: messageOf(error) })
      },
    )
    timer = setInterval(keepAll, request.everyMs)
  } else if (request.op === "hold") held.set(request.batch, request.tokens)
  else if (request.op === "drop") held.delete(request.batch)
  else {
    clearInterval(timer)
    const closing = keeper === undefined ? Promise.resolve() : keeper.then((k) => k.close())
    closing.catch(() => {}).finally(() => report({ op: "closed" }))
  }
}

async function keepAll(): Promise<void> {
  // One round at a time: a slow broker must not pile rounds up.
  if (isKeeping || opened === undefined || held.size === 0) return
  isKeeping = true
  try {
    await opened.keep([...held.values()].flat())
  } catch (error) {
    report({ op: "failed", isFatal: false, error: messageOf(error) })
  } finally {
    isKeeping = false
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
