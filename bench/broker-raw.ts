// `bun bench/broker-raw.ts URL` receives and acknowledges every message of the broker source URL
// until it has had nothing for 1 s (as consume's drain ends), and prints how many as JSON.
import { receiveAndAck } from "@spool/test-support"

const url = process.argv[2]
if (url === undefined) throw new Error("usage: bun bench/broker-raw.ts URL")
process.stdout.write(`${JSON.stringify({ acked: await receiveAndAck(url, 1000, 1000) })}\n`)
