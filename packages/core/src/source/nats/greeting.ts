// Whether the server at a NATS URL speaks NATS. A NATS server greets every connection with an
// INFO line before the client says anything. The client library, given a server that accepts
// the connection and stays silent (a Redis or HTTP port), times out but leaves its socket open,
// which keeps the process alive past its error and its signals. One look at the greeting first
// tells that mistake apart, with an error that names it, and leaves nothing open.
import { SpoolError } from "../../errors.ts"

/**
 * Resolves once the server at `server` (`host:port`) has sent the start of an INFO line;
 * rejects, connected, when it sends something else or closes (a usage error: no NATS server) or
 * says nothing until `timeoutMs` after the connect began (an io error: none, or a hung one). An address refused, unreachable or not connected by
 * then resolves: the client's own connect reports it, as the connection problem it is.
 */
export function checkNatsGreeting(server: string, described: string, timeoutMs: number): Promise<void> {
  const colon = server.lastIndexOf(":")
  const hostname = server.slice(0, colon).replace(/^\[(.*)\]$/, "$1")
  const port = Number(server.slice(colon + 1))
  const check = "check the URL's host and port (NATS listens on 4222 by default)"
  const notNats = (what: string) => new SpoolError("usage", `${described} is not a NATS server: ${what}; ${check}`)
  // Silence may also be a NATS server that is hung: a failure to run, not only a wrong URL.
  const silent = () =>
    new SpoolError(
      "io",
      `${described} sent no INFO greeting within ${timeoutMs} ms: it is not a NATS server, or one that does not answer; ${check}`,
    )
  return new Promise<void>((resolve, reject) => {
    let heard = ""
    let isSettled = false
    let isOpen = false
    let socket: { end(): void } | undefined
    const settle = (error?: SpoolError) => {
      if (isSettled) return
      isSettled = true
      clearTimeout(timer)
      socket?.end()
      if (error === undefined) resolve()
      else reject(error)
    }
    const timer = setTimeout(() => settle(isOpen ? silent() : undefined), timeoutMs)
    Bun.connect({
      hostname,
      port,
      socket: {
        open() {
          isOpen = true
        },
        data(_, chunk) {
          heard += chunk.toString("latin1")
          if (heard.length < 5) return
          settle(
            heard.startsWith("INFO ") ? undefined : notNats(`it greeted with ${JSON.stringify(heard.slice(0, 20))}`),
          )
        },
        close() {
          settle(isOpen ? notNats("it closed the connection without an INFO greeting") : undefined)
        },
        error() {
          settle()
        },
      },
    }).then(
      (s) => {
        socket = s
        if (isSettled) s.end()
      },
      () => settle(),
    )
  })
}
