// The consume engine's I/O worker (see io-thread.ts): moves files between queue directories
// and reads them, one request at a time, in the order the main thread sent them. It makes
// nothing durable: the main thread fsyncs the directories once a reply says what moved.
import { collectGarbageEvery, workDone } from "../collect.ts"
import { SpoolError } from "../errors.ts"
import { type OpenDir, openDir, readMessageFile, renameNoReplaceAt } from "./files.ts"
import {
  type ClaimInReply,
  clockNow,
  InStatus,
  type IoConfig,
  type IoDir,
  type IoRequest,
  type IoResponse,
  type MoveOut,
  type MoveOutReply,
} from "./io-thread.ts"
import { readAheadIfCold } from "./read-ahead.ts"
import { moveFinished } from "./root.ts"

declare const self: Worker

let config: IoConfig
let dirs: Record<IoDir, OpenDir>
let scratch: Buffer
/** Read-ahead storage, reused while no reply holds it (a reply transfers it away). */
let store: Uint8Array<ArrayBuffer> = new Uint8Array(0)

self.onmessage = (event: MessageEvent<IoRequest>) => {
  const request = event.data
  let status: Uint8Array | undefined
  let moved = 0
  try {
    let value: unknown
    if (request.op === "init") {
      config = request.config
      // This thread is spool's own, and its live data tiny: a young collection every 2000
      // files and a full one (2 to 3 ms) every 8000 keep its memory small.
      collectGarbageEvery(2000, 8000)
      const at = (d: IoDir): OpenDir => ({ path: config.dirs[d], fd: openDir(config.dirs[d]) })
      dirs = { inbox: at("inbox"), processing: at("processing"), done: at("done"), error: at("error") }
      scratch = Buffer.allocUnsafe(Math.min(config.maxBytes, 64 * 1024 * 1024) + 1)
    } else if (request.op === "in") {
      const names = request.names === "" ? [] : request.names.split("\0")
      status = new Uint8Array(names.length).fill(InStatus.untried)
      value = claimIn(names, request.regular, request.readCount, request.readBytes, status)
    } else {
      const moves = splitMoves(request.moves)
      value = moveOut(moves, request.deadline)
      moved = moves.length
    }
    const transfer = value !== undefined && request.op === "in" ? [(value as ClaimInReply).data] : []
    postMessage({ id: request.id, ok: true, value } satisfies IoResponse, transfer)
    // After the reply, so the main thread does not wait for a collection.
    workDone(moved)
  } catch (error) {
    postMessage({
      id: request.id,
      ok: false,
      code: error instanceof SpoolError ? error.code : undefined,
      message: error instanceof Error ? error.message : String(error),
      status,
    } satisfies IoResponse)
  }
}

function claimIn(
  names: readonly string[],
  regular: Uint8Array,
  readCount: number,
  readBytes: number,
  status: Uint8Array,
): ClaimInReply {
  for (const [i, name] of names.entries()) {
    const r = renameNoReplaceAt(dirs.inbox, name, dirs.processing, name)
    status[i] = r === "moved" ? InStatus.moved : r === "exists" ? InStatus.exists : InStatus.missing
  }
  // Before any read: files not in memory are then read from the disk together, not one by one.
  const moved = names.filter((_, i) => status[i] === InStatus.moved && regular[i] === 1)
  const coldStarted = readAheadIfCold(dirs.processing, moved, config.maxBytes)
  const spans = new Int32Array(names.length * 2).fill(-1)
  const rejects: [number, "symlink" | "not-regular" | "too-large" | "unreadable" | "vanished", string][] = []
  const hashes: string[] = new Array(names.length).fill(unread)
  let used = 0
  let reads = 0
  for (const [i, name] of names.entries()) {
    if (status[i] !== InStatus.moved) continue
    if (reads++ >= readCount) break
    const read = readMessageFile(dirs.processing, name, regular[i] === 1, config.maxBytes, scratch)
    if (!read.ok) {
      rejects.push([i, read.reason, read.detail])
      continue
    }
    // Past the read-ahead budget the main thread reads the file itself: memory stays bounded
    // however large the batch's files are.
    if (used + read.bytes.length > readBytes) continue
    if (used + read.bytes.length > store.length)
      store = grow(store, used, Math.min(readBytes, Math.max(64 * 1024, 2 * (used + read.bytes.length))))
    store.set(read.bytes, used)
    hashes[i] = Bun.CryptoHasher.hash("sha256", read.bytes, "hex")
    spans[2 * i] = used
    spans[2 * i + 1] = read.bytes.length
    used += read.bytes.length
  }
  const data = store.buffer.slice(0, used) as ArrayBuffer
  return { status, data, spans, rejects, hashes: hashes.join(""), coldStarted }
}

function moveOut(moves: readonly MoveOut[], deadline: number): MoveOutReply {
  const renamed: [number, string][] = []
  const missing: number[] = []
  let expiredAt: number | undefined
  for (const [i, [name, dest, preferred]] of moves.entries()) {
    // Past the deadline the consumer may have been stalled long enough for its claims to be
    // taken over: the main thread checks them before anything more is moved.
    if (clockNow() > deadline) {
      expiredAt = i
      break
    }
    const to = moveFinished(dirs.processing, name, dirs[dest], preferred)
    if (to === undefined) missing.push(i)
    else if (dest === "error" && to !== preferred) renamed.push([i, to])
  }
  return expiredAt === undefined ? { renamed, missing } : { renamed, missing, expiredAt }
}

const unread = " ".repeat(64)

function splitMoves(joined: string): MoveOut[] {
  if (joined === "") return []
  const f = joined.split("\0")
  const moves: MoveOut[] = []
  for (let i = 0; i + 2 < f.length; i += 3)
    moves.push([f[i] as string, f[i + 1] === "error" ? "error" : "done", f[i + 2] as string])
  return moves
}

function grow(from: Uint8Array, used: number, size: number): Uint8Array<ArrayBuffer> {
  const to = new Uint8Array(size)
  to.set(from.subarray(0, used))
  return to
}
