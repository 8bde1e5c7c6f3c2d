-- spool ledger, schema version 2 (PostgreSQL): retention (see sqlite/0002-horizon.sql).
CREATE TABLE horizon (
  order_no  TEXT PRIMARY KEY,
  max_seq   BIGINT NOT NULL,
  pruned    BIGINT NOT NULL,
  pruned_at TEXT NOT NULL
);
CREATE INDEX processed_at ON processed (processed_at);
CREATE INDEX duplicates_seen_at ON duplicates (seen_at);
