// A TCP proxy a test runs in-process between a client and a broker, so that the test can cut
// every connection from the server's side (the client sees the socket closed under it) and
// let the client's reconnect come through again, without stopping the shared broker.
import net from "node:net"

/** A running proxy: `port` on 127.0.0.1 forwards to the target; disposing it closes everything. */
export interface TcpProxy extends AsyncDisposable {
  readonly port: number
  /** Connections accepted so far (a reconnect adds one). */
  readonly accepted: number
  /** Destroys every open connection on both sides; new connections are still accepted. */
  cut(): void
  /** While paused, new connections are refused at once (closed on accept), as a broker that is down. */
  pause(isPaused: boolean): void
}

/** Starts a proxy on a free port of 127.0.0.1 that forwards each connection to host:port. */
export async function tcpProxy(host: string, port: number): Promise<TcpProxy> {
  const open = new Set<net.Socket>()
  let accepted = 0
  let isPaused = false
  const server = net.createServer((client) => {
    if (isPaused) {
      client.destroy()
      return
    }
    accepted++
    const upstream = net.connect({ host, port })
    for (const socket of [client, upstream]) {
      open.add(socket)
      socket.on("close", () => open.delete(socket))
      // A cut surfaces as ECONNRESET on the other side; the pair is torn down either way.
      socket.on("error", () => {
        client.destroy()
        upstream.destroy()
      })
    }
    client.on("close", () => upstream.destroy())
    upstream.on("close", () => client.destroy())
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("the proxy has no TCP address")
  const cut = () => {
    for (const socket of open) socket.destroy()
  }
  return {
    port: address.port,
    get accepted() {
      return accepted
    },
    cut,
    pause(paused: boolean) {
      isPaused = paused
    },
    async [Symbol.asyncDispose]() {
      cut()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
