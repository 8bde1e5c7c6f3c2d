-- spool stats: what the ledger says the consumer has done, over all time and since :since.
-- Each query is named by its `-- name:` line; `bun run stats` runs them all. To run one in the
-- sqlite3 shell, bind the window start first (ISO 8601 UTC, compared as text like the ledger's times):
--   sqlite3 ROOT/ledger.db
--   .param set :since "'2026-01-01T00:00:00.000Z'"
--   .read packages/core/sql/stats.sql

-- name: deliveries
-- Valid messages: first deliveries (processed) and later ones (duplicates; conflicts are the
-- duplicates whose bytes differ from the first delivery's).
SELECT
  (SELECT count(*) FROM processed) AS processed,
  (SELECT count(*) FROM processed WHERE processed_at >= :since) AS processed_recent,
  (SELECT count(*) FROM duplicates) AS duplicates,
  (SELECT count(*) FROM duplicates WHERE seen_at >= :since) AS duplicates_recent,
  (SELECT count(DISTINCT msg_id) FROM duplicates) AS duplicate_ids,
  (SELECT count(*) FROM duplicates WHERE is_conflict = 1) AS conflicts,
  (SELECT count(*) FROM duplicates WHERE is_conflict = 1 AND seen_at >= :since) AS conflicts_recent,
  (SELECT count(*) FROM replays) AS replays,
  (SELECT count(*) FROM replays WHERE replayed_at >= :since) AS replays_recent,
  (SELECT max(processed_at) FROM processed) AS last_processed_at;

-- name: failures
-- Files sent to error/, by reason; `open` counts those neither replayed nor deleted since
-- (still in error/, unless removed by hand: the stats command counts the files in error/ instead).
SELECT
  reason,
  count(*) AS total,
  count(*) FILTER (WHERE failed_at >= :since) AS recent,
  count(*) FILTER (WHERE replayed_at IS NULL AND deleted_at IS NULL) AS open
FROM failures
GROUP BY reason
ORDER BY total DESC, reason;
