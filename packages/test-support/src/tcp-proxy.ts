// A TCP proxy a test runs between a client and a server, to cut the connection the way a
// network does (the sockets reset, nothing said at the protocol level) and to keep the server
// out of reach for a while.
import net from "node:net"

/** A running proxy; stop it when done (`await using proxy = await tcpProxy(5672)`). */
export interface TcpProxy extends AsyncDisposable {
  /** The local port clients connect to instead of the server's. */
  readonly port: number
  /** How many client connections it has accepted and forwarded. */
  readonly forwarded: number
  /**
   * Destroys every open connection, both ways, and for `refuseForMs` afterwards (default 0,
   * `Infinity` for good) closes each new one as soon as it is accepted.
   */
  cut(refuseForMs?: number): void
  /** While paused, each new connection is closed as soon as it is accepted, as by a server that is down. */
  pause(isPaused: boolean): void
}

/** A proxy to `targetHost:targetPort`, listening on 127.0.0.1 at `listenPort` (default: a free port). */
export async function tcpProxy(targetPort: number, targetHost = "127.0.0.1", listenPort = 0): Promise<TcpProxy> {
  const open = new Set<net.Socket>()
  let refuseUntil = 0
  let forwarded = 0
  const server = net.createServer((client) => {
    if (Date.now() < refuseUntil) return void client.destroy()
    forwarded++
    const upstream = net.connect({ host: targetHost, port: targetPort })
    for (const [socket, other] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      open.add(socket)
      socket.on("data", (chunk) => other.write(chunk))
      socket.on("error", () => other.destroy())
      socket.on("close", () => {
        open.delete(socket)
        other.destroy()
      })
    }
  })
  await new Promise<void>((resolve) => server.listen(listenPort, "127.0.0.1", resolve))
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("the proxy has no TCP port")
  return {
    port: address.port,
    get forwarded() {
      return forwarded
    },
    cut(refuseForMs = 0) {
      refuseUntil = Math.max(refuseUntil, Date.now() + refuseForMs)
      for (const socket of open) socket.resetAndDestroy()
    },
    pause(isPaused) {
      refuseUntil = isPaused ? Number.POSITIVE_INFINITY : 0
    },
    async [Symbol.asyncDispose]() {
      refuseUntil = Number.POSITIVE_INFINITY
      for (const socket of open) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
