import { describe, expect, it } from "bun:test"

// A process that catches the stop signals for life, as consume's entry point does, with a timer
// standing in for a socket some library left open after the command returned.
const entry = (thenStop: boolean) =>
  `const { catchStopSignals, stopCatchingSignals } = await import(${JSON.stringify(`${import.meta.dir}/stop.ts`)});` +
  "catchStopSignals(); process.exitCode = 4;" +
  (thenStop ? "stopCatchingSignals();" : "") +
  "setInterval(() => {}, 1000); console.log('ready')"

async function signalled(thenStop: boolean): Promise<{ signal: unknown; alive: boolean }> {
  const child = Bun.spawn(["bun", "-e", entry(thenStop)], { stdout: "pipe" })
  try {
    await child.stdout.getReader().read() // "ready": its handlers are in place
    child.kill("SIGTERM")
    const ended = await Promise.race([child.exited.then(() => true), Bun.sleep(10_000).then(() => false)])
    return { signal: ended ? child.signalCode : null, alive: !ended }
  } finally {
    child.kill("SIGKILL")
    await child.exited
  }
}

describe("stopCatchingSignals", () => {
  // 10 s is the bound on a process ending at a signal, and what the one that does not end costs the run.
  it("lets a signal end a process whose command has returned, where a caught one would not", async () => {
    expect(await signalled(true)).toEqual({ signal: "SIGTERM", alive: false })
    // Caught for life, the signal only asks a command that is no longer there to stop.
    expect((await signalled(false)).alive).toBe(true)
  }, 60_000)
})
