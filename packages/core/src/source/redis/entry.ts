// How a stream entry becomes a Delivery, and how an Origin becomes an entry again. A producer
// writes the message's bytes in the field `body` and may add other fields, which are kept as the
// delivery's headers (text only) and written back by a replay:
//   XADD orders * body '{"msg_id":"m-1",...}' [trace-id abc ...]
// An entry without exactly one `body` field is still delivered, as a refused one: its fields land
// as a JSON object (or, where a name repeats, a JSON array of [name, value] pairs) and the
// delivery is rejected as missing-field, so that nothing stops the stream.
import { type Delivery, type Origin, replayHeader } from "../port.ts"

/** The field a producer writes the message's bytes in. */
export const bodyField = "body"

/** A stream entry as XREADGROUP and XAUTOCLAIM return it: its id and its flat field list. */
export interface Entry {
  readonly id: string
  readonly fields: readonly Buffer[]
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** The Delivery of `entry` from `stream`, delivered `count` times (this one included). */
export function toDelivery(entry: Entry, stream: string, source: string, count: number | undefined): Delivery {
  const bodies: Buffer[] = []
  const headers: Record<string, string> = {}
  const names: string[] = []
  for (let i = 0; i + 1 < entry.fields.length; i += 2) {
    const name = (entry.fields[i] as Buffer).toString("utf8")
    const value = entry.fields[i + 1] as Buffer
    names.push(name)
    if (name === bodyField) bodies.push(value)
    else {
      const text = textOf(value)
      if (text !== undefined) headers[name] = text
    }
  }
  const replayOf = headers[replayHeader]
  const base = {
    id: replayOf === undefined ? entry.id : `replay-${replayOf}`,
    stableId: true,
    deliveryCount: count,
    redelivered: count !== undefined && count > 1,
    // The entry id, not the delivery's id (a replay's is its claim's): the id XCLAIM takes.
    keepToken: entry.id,
    origin: { source, address: stream, ...(Object.keys(headers).length > 0 ? { headers } : {}) },
  }
  const [body] = bodies
  if (body !== undefined && bodies.length === 1)
    return { ...base, body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength) }
  const pairs = names.map((name, i) => [name, (entry.fields[2 * i + 1] as Buffer).toString("utf8")] as const)
  // An object where the names are distinct; where one repeats (two "body" fields), the pairs in
  // order, since an object would keep only its last value.
  const fields = new Set(names).size === names.length ? Object.fromEntries(pairs) : pairs
  const has = names.length === 0 ? "no fields" : `fields ${names.map((n) => JSON.stringify(n)).join(", ")}`
  return {
    ...base,
    body: new TextEncoder().encode(`${JSON.stringify(fields)}\n`),
    refusal: {
      reason: "missing-field",
      detail:
        `Redis entry ${entry.id} of stream ${JSON.stringify(stream)} has ${bodies.length > 1 ? `${bodies.length} "body" fields` : `no "body" field`} ` +
        `(it has ${has}); a producer writes the message in one field "body": XADD ${stream} * body '{"msg_id":...}'`,
    },
  }
}

/** The field list a replay of `origin` is added with: the body first, then its headers. */
export function entryFields(origin: Origin, body: Uint8Array): (string | Buffer)[] {
  const fields: (string | Buffer)[] = [bodyField, Buffer.from(body.buffer, body.byteOffset, body.byteLength)]
  for (const [name, value] of Object.entries(origin.headers ?? {})) if (name !== bodyField) fields.push(name, value)
  return fields
}

/** An entry as a reply lists it: fields null when it was deleted from the stream. */
export interface RawEntry {
  readonly id: string
  readonly fields: readonly Buffer[] | null
}

/** The entries of an XREADGROUP, XAUTOCLAIM or XCLAIM reply's entry list; a deleted entry has fields null. */
export function entriesOf(reply: unknown): RawEntry[] {
  if (!Array.isArray(reply)) return []
  return reply.map((item: unknown) => {
    const [id, fields] = item as [Buffer | string, Buffer[] | null]
    return { id: id.toString(), fields: Array.isArray(fields) ? fields : null }
  })
}

function textOf(value: Buffer): string | undefined {
  try {
    return utf8.decode(value)
  } catch {
    return undefined
  }
}
