-- spool ledger, schema version 3 (SQLite): two indexes fewer on the per-message write path.
--
-- claims (owner_id, state): claims holds only the files in flight (a few batches per consumer),
-- so the statements that look rows up by owner scan a small table, while the index cost a
-- B-tree write per file at each of claim, commit and forget.
--
-- processed (order_no, seq): no statement of spool's uses it (order-check.sql reads the whole
-- table and groups it, just as fast without it), and because order numbers arrive in random
-- order each batch rewrote most of its leaf pages: about a quarter of the pages a commit writes
-- to the WAL. An application that looks up single orders can add it back:
--   CREATE INDEX IF NOT EXISTS processed_order_seq ON processed (order_no, seq);
DROP INDEX claims_owner;
DROP INDEX processed_order_seq;
