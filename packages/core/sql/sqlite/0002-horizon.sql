-- spool ledger, schema version 2 (SQLite): retention.
-- compact prunes processed rows older than the deduplication horizon. For each order it keeps
-- the highest pruned seq, so a later delivery at or below it with an unknown msg_id is
-- recognised as older than the horizon (it cannot be proven new) instead of being applied.
CREATE TABLE horizon (
  order_no  TEXT PRIMARY KEY,
  max_seq   INTEGER NOT NULL,
  pruned    INTEGER NOT NULL,  -- how many processed rows of this order were pruned
  pruned_at TEXT NOT NULL
);
CREATE INDEX processed_at ON processed (processed_at);
CREATE INDEX duplicates_seen_at ON duplicates (seen_at);
