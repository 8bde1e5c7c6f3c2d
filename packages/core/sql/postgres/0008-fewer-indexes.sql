-- spool ledger, schema version 8 (PostgreSQL): two indexes fewer on the per-message write path,
-- the two SQLite's version 3 drops (see sqlite/0003-fewer-indexes.sql), and room for the commit's
-- claim updates on the claims' own pages.
--
-- claims (owner_id, state): claims holds only the files in flight (a few batches per consumer),
-- so the statements that look rows up by owner (a consumer's end, forgetConsumers) scan a small
-- table, while the index cost an index entry per file at each of claim and commit. Without it
-- no index covers a column the commit changes (state, dest, dest_name, payload_hash), so that
-- update can be a heap-only (HOT) one: no new index entry at all.
--
-- processed (order_no, seq): no statement of spool's uses it (order-check.sql reads the whole
-- table and groups it), and order numbers arrive in random order, so each batch dirtied leaf
-- pages all over it. An application that looks up single orders can add it back:
--   CREATE INDEX IF NOT EXISTS processed_order_seq ON processed (order_no, seq);
--
-- fillfactor 50 on claims: a claim row is updated once by the commit of its batch, soon after it
-- was inserted; a HOT update needs free space on the row's own page. The table stays small
-- (its rows are forgotten once their files have moved), so the space costs little.
DROP INDEX claims_owner;
DROP INDEX processed_order_seq;
ALTER TABLE claims SET (fillfactor = 50);
