-- spool ledger, schema version 7 (SQLite): files an operator deleted (`spool delete`). A file
-- thrown away from error/ closes its failure (`deleted_at`), so the failure no longer counts as
-- open nor names a file in error.csv; one thrown away from deferred/ loses its deferrals row, so it
-- is never picked up. Each deletion is logged here, in the transaction that unlinks the file.
ALTER TABLE failures ADD COLUMN deleted_at TEXT;   -- set when delete removed its file from error/
CREATE TABLE deletions (
  id         INTEGER PRIMARY KEY,
  file       TEXT NOT NULL,       -- the name in error/ or deferred/
  dir        TEXT NOT NULL CHECK (dir IN ('error', 'deferred')),
  failure_id INTEGER,             -- the failure it closed (error/), if the ledger had one
  msg_id     TEXT,                -- the deferred message's msg_id (deferred/)
  deleted_at TEXT NOT NULL
);
CREATE INDEX deletions_file ON deletions (file);
