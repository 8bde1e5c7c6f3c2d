// The connection a JetStream source talks through, and whether it is up right now. The client
// reconnects by itself, but whatever it writes while the socket is dying or down is discarded
// (it resets its outbound buffer on each reconnect), so the source must know when to wait and
// when to send again.
import type { NatsConnection } from "@nats-io/transport-node"

/** A NATS connection's up/down state, with waits on it. */
export class Link {
  private isUp = true
  private isClosing = false
  private wakers = new Set<() => void>()
  private readonly disconnectListeners = new Set<() => void>()
  private readonly reconnectListeners = new Set<() => void>()

  constructor(readonly nc: NatsConnection) {
    void this.watch()
  }

  /** Whether the source is still in use and its connection not closed for good. */
  get isOpen(): boolean {
    return !this.isClosing && !this.nc.isClosed()
  }

  /** Stops every wait on the link: the source is closing. */
  close(): void {
    this.isClosing = true
    this.wake()
  }

  /**
   * Resolves true once the connection is up (at once when it is), false when `deadline`
   * (epoch ms) passes, `signal` aborts or the source closes first.
   */
  whenConnected(deadline: number, signal?: AbortSignal): Promise<boolean> {
    if (this.isUp || !this.isOpen) return Promise.resolve(this.isUp && this.isOpen)
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer)
        signal?.removeEventListener("abort", done)
        this.wakers.delete(done)
        resolve(this.isUp && this.isOpen)
      }
      const timer = setTimeout(done, Math.max(0, deadline - Date.now()))
      signal?.addEventListener("abort", done, { once: true })
      this.wakers.add(done)
      if (signal?.aborted) done()
    })
  }

  /** Calls `listener` when the connection drops; returns the function that removes it. */
  onDisconnect(listener: () => void): () => void {
    this.disconnectListeners.add(listener)
    return () => this.disconnectListeners.delete(listener)
  }

  /**
   * Resolves when the connection comes back after a drop (or the source closes): a reply that
   * was awaited across it will not come, because the request was written into the dead socket.
   * `cancel` drops the wait.
   */
  nextReconnect(): { readonly reconnected: Promise<void>; cancel(): void } {
    let listener = () => {}
    const reconnected = new Promise<void>((resolve) => {
      listener = resolve
      this.reconnectListeners.add(listener)
      this.wakers.add(listener)
    })
    return {
      reconnected,
      cancel: () => {
        this.reconnectListeners.delete(listener)
        this.wakers.delete(listener)
      },
    }
  }

  private async watch(): Promise<void> {
    for await (const status of this.nc.status()) {
      if (status.type === "disconnect") {
        this.isUp = false
        for (const listener of [...this.disconnectListeners]) listener()
      } else if (status.type === "reconnect") {
        this.isUp = true
        const listeners = [...this.reconnectListeners]
        this.reconnectListeners.clear()
        for (const listener of listeners) {
          this.wakers.delete(listener)
          listener()
        }
        this.wake()
      }
    }
    this.isUp = false
    this.wake()
  }

  private wake(): void {
    const wakers = [...this.wakers]
    this.wakers.clear()
    for (const waker of wakers) waker()
  }
}
