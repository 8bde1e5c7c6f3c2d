-- spool ledger, schema version 1 (PostgreSQL). The same tables as the SQLite ledger, with
-- root_id added wherever a row belongs to one queue root: several roots (hosts) share one
-- PostgreSQL ledger, and their file names may collide. Times are ISO 8601 UTC text, as in
-- SQLite, so reports and order-check read the same on both backends.

CREATE TABLE processed (
  msg_id       TEXT PRIMARY KEY,
  order_no     TEXT NOT NULL,
  seq          BIGINT NOT NULL,
  amount       TEXT NOT NULL,      -- the decimal exactly as written in the message
  file         TEXT NOT NULL,
  root_id      TEXT NOT NULL,      -- which queue root delivered it
  payload_hash TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  claim_id     TEXT NOT NULL UNIQUE,
  processed_at TEXT NOT NULL
);
CREATE INDEX processed_order_seq ON processed (order_no, seq);

CREATE TABLE duplicates (
  id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  msg_id       TEXT NOT NULL,
  file         TEXT NOT NULL,
  root_id      TEXT NOT NULL,
  payload_hash TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  is_conflict  INTEGER NOT NULL DEFAULT 0,
  claim_id     TEXT NOT NULL UNIQUE,
  seen_at      TEXT NOT NULL
);
CREATE INDEX duplicates_msg_id ON duplicates (msg_id);

CREATE TABLE failures (
  id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  root_id      TEXT NOT NULL,
  file         TEXT NOT NULL,      -- name in error/ of that root
  original     TEXT NOT NULL,
  reason       TEXT NOT NULL,
  detail       TEXT NOT NULL,
  payload_hash TEXT,
  claim_id     TEXT NOT NULL UNIQUE,
  failed_at    TEXT NOT NULL,
  replayed_at  TEXT
);
CREATE INDEX failures_file ON failures (root_id, file);

CREATE TABLE claims (
  root_id      TEXT NOT NULL,
  name         TEXT NOT NULL,
  seq_no       BIGINT GENERATED ALWAYS AS IDENTITY, -- claim order, for recovery
  claim_id     TEXT NOT NULL,
  owner_id     TEXT,
  attempts     INTEGER NOT NULL,
  state        TEXT NOT NULL CHECK (state IN ('claimed', 'committed')),
  dest         TEXT,
  dest_name    TEXT,
  payload_hash TEXT,
  claimed_at   TEXT NOT NULL,
  PRIMARY KEY (root_id, name)
);
CREATE INDEX claims_owner ON claims (owner_id, state);

CREATE TABLE consumers (
  owner_id     TEXT PRIMARY KEY,
  root_id      TEXT NOT NULL,
  host         TEXT NOT NULL,
  pid          INTEGER NOT NULL,
  boot_id      TEXT NOT NULL,
  start_ticks  TEXT NOT NULL,
  started_at   TEXT NOT NULL,
  heartbeat_at TEXT NOT NULL
);

CREATE TABLE replays (
  id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  root_id     TEXT NOT NULL,
  file        TEXT NOT NULL,
  failure_id  BIGINT,
  replayed_at TEXT NOT NULL
);
CREATE INDEX replays_file ON replays (root_id, file);
