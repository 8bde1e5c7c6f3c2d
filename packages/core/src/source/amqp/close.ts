// Closing an amqplib channel or connection without hanging on a dead socket.
import type { EventEmitter } from "node:events"

/**
 * Closes a channel or connection and resolves once it is closed: when the broker answered the
 * close (for a channel, after applying every ack sent before it), or when the 'close' event
 * says it ended another way, since amqplib's close() never settles once the socket under it is
 * gone. Never rejects: a close that fails has nothing left to flush.
 */
export function closeQuietly(target: EventEmitter & { close(): Promise<void> }): Promise<void> {
  return new Promise((resolve) => {
    target.once("close", () => resolve())
    target.close().then(
      () => resolve(),
      () => resolve(),
    )
  })
}
