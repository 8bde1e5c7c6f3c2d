-- spool ledger, schema version 3 (PostgreSQL): the ledger's identity. Each queue root bound to
-- this ledger records the id in ROOT/.spool/ledger, so that a root pointed at another database
-- (another URL, a database dropped and made anew) is refused instead of being deduplicated
-- against keys that are not its own. (SQLite's version 3 drops two indexes; its ledger lives
-- in the root and needs no id.)
CREATE TABLE spool_ledger (
  ledger_id  TEXT PRIMARY KEY,
  created_at TEXT NOT NULL
);
INSERT INTO spool_ledger (ledger_id, created_at)
VALUES (gen_random_uuid()::text, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'));
