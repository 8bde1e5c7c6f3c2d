-- spool ledger, schema version 7 (PostgreSQL): files an operator deleted (see
-- sqlite/0007-deletions.sql), per root.
ALTER TABLE failures ADD COLUMN deleted_at TEXT;
CREATE TABLE deletions (
  id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  root_id    TEXT NOT NULL,
  file       TEXT NOT NULL,
  dir        TEXT NOT NULL CHECK (dir IN ('error', 'deferred')),
  failure_id BIGINT,
  msg_id     TEXT,
  deleted_at TEXT NOT NULL
);
CREATE INDEX deletions_file ON deletions (root_id, file);
