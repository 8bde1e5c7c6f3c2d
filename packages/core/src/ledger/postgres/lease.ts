// The PostgreSQL ledger's leases, written and judged by the database server's clock, never by
// a host's. Hosts sharing a ledger may disagree by minutes; were heartbeats stamped and judged
// by each host's own clock, a host ahead would see every other host's live heartbeat as stale
// and take its claims over, and a host behind would look stale to all the others. The server
// is the one clock every host reads alike, so the lease holds however far the hosts drift.

/** The server's clock, as the ISO text the ledger stores times in (`2026-01-31T12:00:00.000Z`). */
export const serverNow = `to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

/** Refreshes a consumer's heartbeat ($1: its owner id) by the server's clock. */
export const heartbeat = `UPDATE consumers SET heartbeat_at = ${serverNow} WHERE owner_id = $1`

/** The age in milliseconds, by the server's clock, of the heartbeat of a claim's owner joined as `o`. */
export const heartbeatAgeMs = `(EXTRACT(EPOCH FROM clock_timestamp() - o.heartbeat_at::timestamptz) * 1000)::float8`

/** Registers a consumer ($1 owner id, $2 root id, $3 host, $4 pid, $5 boot id, $6 start ticks, $7 start time), its first heartbeat by the server's clock. */
export const register = `INSERT INTO consumers (owner_id, root_id, host, pid, boot_id, start_ticks, started_at, heartbeat_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, ${serverNow})
  ON CONFLICT (owner_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`
